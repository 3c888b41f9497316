#!/usr/bin/env bash
# Build the two images: the sandbox runtime and the controller.
#
#   images/build.sh                              # dataspace/runtime:dev, dataspace/controller:dev
#   images/build.sh --registry ghcr.io/acme --tag 1.0.0 --push
#   images/build.sh --kind dataspace             # also load both into the kind cluster "dataspace"
#
# The sandbox runtime is built on the docker backend's image (DATASPACE_DOCKER_IMAGE,
# dataspace-workbench:1.0), which scripts/dev.sh, run as root, builds on the Debian 12 root
# it makes with debootstrap: every backend shows the agent the same files. Versions are
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
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
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
echo "building $runtime on $workbench" >&2
"$docker" build --build-arg "BASE_IMAGE=$workbench" -f "$here/Dockerfile.runtime" -t "$runtime" "$here"
echo "building $controller" >&2
"$docker" build "${args[@]}" -f "$here/Dockerfile.controller" -t "$controller" "$repo"

if ((push)); then
    "$docker" push "$runtime"
    "$docker" push "$controller"
fi
if [[ -n "$kind_cluster" ]]; then
    kind load docker-image --name "$kind_cluster" "$runtime" "$controller"
fi
echo "$runtime"
echo "$controller"
