#!/usr/bin/env bash
# Build the two images: the sandbox runtime and the controller.
#
#   images/build.sh                              # dataspace/runtime:dev, dataspace/controller:dev
#   images/build.sh --registry ghcr.io/acme --tag 1.0.0 --push
#   images/build.sh --kind dataspace             # also load both into the kind cluster "dataspace"
#   images/build.sh --runtime-only               # the sandbox runtime alone (needs no registry)
#
# The sandbox runtime is built on the docker backend's image (DATASPACE_DOCKER_IMAGE,
# dataspace-workbench:1.0), which scripts/dev.sh, run as root, builds on the Debian 12 root
# it makes with debootstrap: every backend shows the agent the same files. The harnesses
# it adds are this host's pinned install (DATASPACE_HARNESS_ROOT, /opt/dataspace/harnesses:
# Codex and Claude Code by `python -m dataspace.agents.native.install`, smolagents by
# scripts/dev.sh), so the runtime needs no registry to build. Versions are
# pinned: Debian packages by that root, Python packages by exact version
# (runtime-requirements.txt, constraints.txt, controller-requirements.txt), the
# controller's Python base image by tag (PYTHON_IMAGE) and its Debian packages by a dated
# snapshot of the archive (DEBIAN_SNAPSHOT).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

registry="dataspace"
tag="dev"
push=0
kind_cluster=""
runtime_only=0
python_image="${PYTHON_IMAGE:-python:3.11.11-slim-bookworm}"
debian_snapshot="${DEBIAN_SNAPSHOT:-20250601T000000Z}"
docker="${DOCKER:-docker}"
workbench="${DATASPACE_DOCKER_IMAGE:-dataspace-workbench:1.0}"

while (($#)); do
    case "$1" in
        --registry) registry="$2"; shift 2 ;;
        --tag) tag="$2"; shift 2 ;;
        --push) push=1; shift ;;
        --kind) kind_cluster="$2"; shift 2 ;;
        --runtime-only) runtime_only=1; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done

runtime="$registry/runtime:$tag"
controller="$registry/controller:$tag"
args=(--build-arg "PYTHON_IMAGE=$python_image" --build-arg "DEBIAN_SNAPSHOT=$debian_snapshot")

if ! "$docker" image inspect "$workbench" >/dev/null 2>&1; then
    echo "error: no image $workbench, the base of the runtime: run scripts/dev.sh as root once" >&2
    exit 1
fi
python="${PYTHON:-$repo/.venv/bin/python}"
harness_root="${DATASPACE_HARNESS_ROOT:-/opt/dataspace/harnesses}"
if ! PYTHONPATH="$repo" DATASPACE_HARNESS_ROOT="$harness_root" "$python" -m dataspace.agents.native.install --check codex claude-code >&2; then
    echo "error: the runtime adds the pinned harnesses of $harness_root: run \`$python -m dataspace.agents.native.install\`" >&2
    exit 1
fi
smolagents_stamp=$(sha256sum < "$here/smolagents-requirements.txt" | cut -c1-16)
if [[ "$(cat "$harness_root/smolagents/.stamp" 2>/dev/null)" != "$smolagents_stamp" ]]; then
    echo "error: no smolagents harness of images/smolagents-requirements.txt in $harness_root: run scripts/dev.sh as root once" >&2
    exit 1
fi
# the build context: the harnesses alone (hard links, else copies; links resolved), which
# the sandbox user must be able to read
context=$(mktemp -d "${TMPDIR:-/tmp}/dataspace-runtime.XXXXXX")
trap 'rm -rf "$context"' EXIT
mkdir "$context/harnesses"
for name in codex claude-code smolagents; do
    source_dir=$(readlink -f "$harness_root/$name")
    unreadable=$(find "$source_dir" \( ! -perm -a+r -o -type d ! -perm -a+x \) -print -quit)
    if [[ -n "$unreadable" ]]; then
        echo "error: $unreadable is not readable by all (the sandbox user): chmod -R a+rX $source_dir" >&2
        exit 1
    fi
    cp -al "$source_dir" "$context/harnesses/$name" 2>/dev/null || cp -a "$source_dir" "$context/harnesses/$name"
done
echo "building $runtime on $workbench" >&2
"$docker" build --build-arg "BASE_IMAGE=$workbench" -f "$here/Dockerfile.runtime" -t "$runtime" "$context"
images=("$runtime")
if ((!runtime_only)); then
    echo "building $controller" >&2
    "$docker" build "${args[@]}" -f "$here/Dockerfile.controller" -t "$controller" "$repo"
    images+=("$controller")
fi

if ((push)); then
    for image in "${images[@]}"; do "$docker" push "$image"; done
fi
if [[ -n "$kind_cluster" ]]; then
    kind load docker-image --name "$kind_cluster" "${images[@]}"
fi
printf '%s\n' "${images[@]}"
