#!/usr/bin/env bash
# Set up (or reuse) .venv at the repository root with everything the project needs, then
# run one of:  demo [ARGS]   |   test [PYTEST ARGS]   |   shell CMD...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

pip_quietly() {
    # a pip command, without this machine's notes about absent local package folders
    "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

python_bin() {
    # Debian's python3.11 first (installed below for the workbench): Debian builds it with
    # profile-guided and link-time optimization, so every command, test and Ray worker of the
    # project spends less CPU than on an unoptimized build (a run's processes about 12%)
    for c in /usr/bin/python3.11 python3.11 python3; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
            command -v "$c"; return 0
        fi
    done
    echo "error: Python 3.11 is required (python3.11 or python3 must be 3.11)" >&2
    return 1
}

ensure_system_packages() {
    local missing=()
    while read -r pkg; do
        [[ -z "$pkg" || "$pkg" == \#* ]] && continue
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done < <(cat scripts/system-packages.txt images/workbench-packages.txt)
    ((${#missing[@]})) || return 0
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
        echo "warning: missing Debian packages ${missing[*]} (install them as root); tests that need them will fail" >&2
        return 0
    fi
    echo "installing Debian packages: ${missing[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# One Debian 12 (bookworm) root for every sandbox backend: debootstrap's minimal base plus
# the workbench's Debian packages (images/workbench-packages.txt) and Debian's python3.11
# (the base of the workbench Python). The local sandbox shows its /usr and /etc entries
# to the agent instead of the host's; the docker backend's runtime image is built on it
# (ensure_docker). Made once under /opt/dataspace/root-<stamp> and swapped in by renaming
# the link /opt/dataspace/root; remade when the package list changes.
debian_root_packages() {
    { sed -e 's/#.*//' images/workbench-packages.txt; echo python3.11; } | tr -s ' \n' '\n' | grep -v '^$' | sort -u
}

# The runtime manifest of the workbench at $1, with the versions of the Debian packages
# the sandboxes see: those of the Debian root (the host's while there is none).
write_workbench_manifest() {
    local admindir=/var/lib/dpkg
    [[ -d "$1/root/var/lib/dpkg" ]] && admindir="$1/root/var/lib/dpkg"
    DPKG_ADMINDIR="$admindir" "$1/python/bin/python" images/workbench_manifest.py \
        "$1" images/workbench-packages.txt
    chmod a+r "$1"/*.txt "$1"/*.json "$1/TOOLS.md"
}

ensure_debian_root() {
    local root="${DATASPACE_RUNTIME_ROOT:-/opt/dataspace}"
    local mirror="${DATASPACE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
    local stamp; stamp=$(debian_root_packages | sha256sum | cut -c1-16)
    [[ -f "$root/root/.stamp" && "$(cat "$root/root/.stamp")" == "$stamp" ]] && return 0
    if [[ $(id -u) -ne 0 ]] || ! command -v debootstrap >/dev/null 2>&1; then
        echo "warning: no Debian 12 root at $root/root (run scripts/dev.sh as root once); sandboxes need it" >&2
        return 0
    fi
    echo "making the Debian 12 root of the sandboxes in $root/root (first run takes a few minutes)" >&2
    mkdir -p "$root"
    (
        flock 9
        [[ -f "$root/root/.stamp" && "$(cat "$root/root/.stamp")" == "$stamp" ]] && exit 0
        local build="root-$stamp"
        rm -rf "${root:?}/$build"
        debootstrap --variant=minbase --include="$(debian_root_packages | paste -sd,)" \
            bookworm "$root/$build" "$mirror" > "$root/.debootstrap.log" 2>&1 \
            || { tail -20 "$root/.debootstrap.log" >&2; exit 1; }
        rm -rf "$root/$build"/var/cache/apt/archives/*.deb "$root/$build"/var/lib/apt/lists/*
        echo "$stamp" > "$root/$build/.stamp"
        local previous=""
        [[ -L "$root/root" ]] && previous=$(readlink "$root/root")
        ln -sfn "$build" "$root/.root-link"
        mv -T "$root/.root-link" "$root/root"
        for old in "$root"/root-*; do
            [[ "$(basename "$old")" == "$build" || "$(basename "$old")" == "$previous" ]] || rm -rf "$old"
        done
        # the workbench's manifest names the root's package versions
        if [[ -x "$root/python/bin/python" ]]; then write_workbench_manifest "$root"; fi
    ) 9> "$root/.root-lock"
}

# Data Workbench Runtime 1.0 for the local sandbox: a Python of its own at
# /opt/dataspace/python (a venv of Debian's python3.11, shown inside the sandbox at
# /usr/local), built from images/runtime-requirements.txt, plus TOOLS.md, capabilities.json
# and the runtime manifest. Rebuilt when those files change; /opt/dataspace's other
# folders (harnesses/) are left alone.
ensure_workbench() {
    local root="${DATASPACE_RUNTIME_ROOT:-/opt/dataspace}"
    local stamp; stamp=$(cat images/runtime-requirements.txt images/workbench-packages.txt \
        images/TOOLS.md images/capabilities.json images/workbench_manifest.py | sha256sum | cut -c1-16)
    [[ -f "$root/.workbench-stamp" && "$(cat "$root/.workbench-stamp")" == "$stamp" ]] && return 0
    if [[ ! -w "$(dirname "$root")" && ! -w "$root" ]]; then
        echo "warning: cannot write $root (run scripts/dev.sh as root once); the local sandbox needs the workbench" >&2
        return 0
    fi
    if [[ ! -x /usr/bin/python3.11 ]]; then
        echo "error: /usr/bin/python3.11 (Debian python3.11, python3-venv) is needed for the workbench" >&2
        return 1
    fi
    echo "installing the Data Workbench Runtime into $root (first run takes a few minutes)" >&2
    mkdir -p "$root"
    (
        flock 9
        [[ -f "$root/.workbench-stamp" && "$(cat "$root/.workbench-stamp")" == "$stamp" ]] && exit 0
        # Built in a folder of its own, then swapped in by renaming a link: sandboxes that
        # start meanwhile (another checkout's tests) see the old workbench or the new one,
        # never half of one. The previous build stays for sandboxes still using it.
        local build="python-$stamp"
        rm -rf "${root:?}/$build"
        /usr/bin/python3.11 -m venv "$root/$build"
        pip_quietly "$root/$build/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
            -r images/runtime-requirements.txt
        "$root/$build/bin/python" -m pip check >/dev/null
        chmod -R a+rX "$root/$build"
        local previous=""
        if [[ -L "$root/python" ]]; then
            previous=$(readlink "$root/python")
        elif [[ -d "$root/python" ]]; then
            previous="python-old"
            rm -rf "${root:?}/python-old"
            mv "$root/python" "$root/python-old"
        fi
        ln -sfn "$build" "$root/.python-link"
        mv -T "$root/.python-link" "$root/python"
        for old in "$root"/python-*; do
            [[ "$(basename "$old")" == "$build" || "$(basename "$old")" == "$previous" ]] || rm -rf "$old"
        done
        for name in TOOLS.md capabilities.json; do
            install -m 0644 "images/$name" "$root/.$name.tmp" && mv -f "$root/.$name.tmp" "$root/$name"
        done
        write_workbench_manifest "$root"
        echo "$stamp" > "$root/.workbench-stamp"
    ) 9> "$root/.workbench-lock"
}

# The smolagents harness (1.26.0) in a folder of its own, not in the workbench Python:
# /opt/dataspace/harnesses/smolagents/site, installed with the workbench Python's pip from
# images/smolagents-requirements.txt (--no-deps --target). Only the harness's own process
# adds it to its sys.path, so an agent's python3 sees the official workbench packages alone.
# Rebuilt when the list changes; built beside the old one and swapped in by a link rename.
ensure_smolagents() {
    local root="${DATASPACE_RUNTIME_ROOT:-/opt/dataspace}"
    local hroot="${DATASPACE_HARNESS_ROOT:-$root/harnesses}"
    [[ -x "$root/python/bin/python" ]] || return 0
    local stamp; stamp=$(cat images/smolagents-requirements.txt | sha256sum | cut -c1-16)
    [[ -f "$hroot/smolagents/.stamp" && "$(cat "$hroot/smolagents/.stamp")" == "$stamp" ]] && return 0
    if [[ ! -w "$hroot" && ! -w "$(dirname "$hroot")" ]]; then
        echo "warning: cannot write $hroot (run scripts/dev.sh as root once); the smolagents harness needs it" >&2
        return 0
    fi
    echo "installing the smolagents harness into $hroot/smolagents" >&2
    mkdir -p "$hroot"
    (
        flock 9
        [[ -f "$hroot/smolagents/.stamp" && "$(cat "$hroot/smolagents/.stamp")" == "$stamp" ]] && exit 0
        local build="smolagents-$stamp"
        rm -rf "${hroot:?}/$build"
        pip_quietly "$root/python/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
            --target "$hroot/$build/site" -r images/smolagents-requirements.txt
        PYTHONPATH="$hroot/$build/site" "$root/python/bin/python" -c \
            'import smolagents, openai, yaml; print(smolagents.__version__)' > "$hroot/$build/VERSION"
        echo "$stamp" > "$hroot/$build/.stamp"
        chmod -R a+rX "$hroot/$build"
        local previous=""
        [[ -L "$hroot/smolagents" ]] && previous=$(readlink "$hroot/smolagents")
        [[ -d "$hroot/smolagents" && ! -L "$hroot/smolagents" ]] && rm -rf "${hroot:?}/smolagents"
        ln -sfn "$build" "$hroot/.smolagents-link"
        mv -T "$hroot/.smolagents-link" "$hroot/smolagents"
        for old in "$hroot"/smolagents-*; do
            [[ "$(basename "$old")" == "$build" || "$(basename "$old")" == "$previous" ]] || rm -rf "$old"
        done
    ) 9> "$hroot/.smolagents-lock"
}

# The docker sandbox backend (as root, with Debian's docker.io): start the daemon if none
# answers (no iptables and no default bridge: containers run with network none), import
# the Debian root as the base image and build the runtime image (images/Dockerfile.workbench,
# tagged dataspace-workbench:1.0) on it from this host's workbench; rebuilt when the root,
# the workbench or the Dockerfile change. Without root or docker.io, a warning.
ensure_docker() {
    local root="${DATASPACE_RUNTIME_ROOT:-/opt/dataspace}"
    local image="${DATASPACE_DOCKER_IMAGE:-dataspace-workbench:1.0}"
    if [[ $(id -u) -ne 0 || ! -x /usr/sbin/dockerd || ! -f "$root/root/.stamp" || ! -x "$root/python/bin/python" ]]; then
        echo "warning: the docker sandbox backend needs root, docker.io, the Debian root and the workbench; its tests will skip" >&2
        return 0
    fi
    if ! docker version >/dev/null 2>&1; then
        echo "starting dockerd (log: /var/log/dataspace-dockerd.log)" >&2
        # in a session of its own: the daemon outlives the shell and process group that start it
        setsid nohup /usr/sbin/dockerd --iptables=false --ip-masq=false --ip-forward=false --bridge=none \
            ${DATASPACE_DOCKER_STORAGE_DRIVER:+--storage-driver="$DATASPACE_DOCKER_STORAGE_DRIVER"} \
            >> /var/log/dataspace-dockerd.log 2>&1 &
        for _ in $(seq 60); do docker version >/dev/null 2>&1 && break; sleep 0.5; done
        docker version >/dev/null 2>&1 || { echo "warning: dockerd did not start (see /var/log/dataspace-dockerd.log); the docker backend's tests will skip" >&2; return 0; }
    fi
    local base; base="dataspace/debian:bookworm-$(cat "$root/root/.stamp")"
    if ! docker image inspect "$base" >/dev/null 2>&1; then
        echo "importing the Debian 12 root as $base" >&2
        tar -C "$root/root" --numeric-owner -c . | docker import - "$base" >/dev/null
    fi
    local stamp; stamp=$( { echo "$base"; cat "$root/.workbench-stamp" "$root/runtime-manifest.json" \
        images/Dockerfile.workbench; } | sha256sum | cut -c1-16)
    [[ "$(docker image inspect --format '{{index .Config.Labels "org.dataspace.build-stamp"}}' "$image" 2>/dev/null)" == "$stamp" ]] && return 0
    echo "building the runtime image $image on $base" >&2
    local context; context=$(mktemp -d "$root/.docker-context.XXXXXX")
    cp -al "$(readlink -f "$root/python")" "$context/python"
    cp images/Dockerfile.workbench "$root"/{TOOLS.md,capabilities.json,python-packages.txt,system-packages.txt,runtime-manifest.json} "$context/"
    docker build -q --build-arg BASE_IMAGE="$base" --label org.dataspace.build-stamp="$stamp" \
        -t "$image" -f "$context/Dockerfile.workbench" "$context" \
        > /dev/null 2> >(grep -v -e DEPRECATED -e "legacy builder" -e buildx -e "^ *$" >&2) \
        || { rm -rf "$context"; echo "error: building $image failed" >&2; return 1; }
    rm -rf "$context"
}

ensure_venv() {
    local py; py=$(python_bin)
    [[ -x .venv/bin/python ]] || "$py" -m venv .venv
    local stamp; stamp=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
    if [[ ! -f .venv/.dataspace-stamp || "$(cat .venv/.dataspace-stamp)" != "$stamp" ]]; then
        echo "installing the project into .venv (first run takes about half a minute)" >&2
        # uv (pinned in constraints.txt) installs the same pins as pip in a third of the time
        # and compiles them to bytecode on every core; pip installs where uv is not to be had
        if ! { pip_quietly .venv/bin/python -m pip install -q --disable-pip-version-check \
                   -c constraints.txt uv \
               && .venv/bin/python -m uv pip install -q --python .venv/bin/python \
                   --compile-bytecode -c constraints.txt -e '.[dev]'; }; then
            echo "warning: installing with uv failed (above); installing with pip" >&2
            pip_quietly .venv/bin/python -m pip install -q --disable-pip-version-check \
                -c constraints.txt -e '.[dev]'
        fi
        echo "$stamp" > .venv/.dataspace-stamp
    fi
}

ensure_bytecode() {
    # The project's own modules compiled once here: an editable install is not compiled, and
    # with PYTHONDONTWRITEBYTECODE set every process (each command, Ray worker and harness
    # runner) would compile every module it imports again. Up-to-date files are skipped.
    .venv/bin/python -m compileall -q -j 0 dataspace builder evaluator ray_jobs
}

ensure_harnesses() {
    # The native harness CLIs (Codex, Claude Code) at their pinned versions, from npm, under
    # ${DATASPACE_HARNESS_ROOT:-/opt/dataspace/harnesses}; a no-op when they are installed.
    # Grok Build is not on a registry: see `python -m dataspace.agents.native.install -h`.
    .venv/bin/python -m dataspace.agents.native.install >/dev/null \
        || echo "warning: native harnesses not installed (see above); their tests will skip" >&2
}

cmd="${1:-}"; shift || true
ensure_system_packages
ensure_debian_root
ensure_workbench
ensure_smolagents
ensure_docker
ensure_venv
ensure_bytecode
ensure_harnesses
case "$cmd" in
    demo) exec .venv/bin/dataspace demo "$@" ;;
    test)
        # in worker processes (pytest-xdist), one test file per worker at a time: two workers
        # more than cores, from 4 to 6 (many tests wait on a deadline, a held model call or a
        # sandbox: with 3 workers 2 cores were busy about 1.7 of the time; back to back, 4 took
        # 689 s where 3 took 733 s), the files in the order tests/conftest.py gives them
        # (longest first, from tests/durations.json), not xdist's by test count
        workers=$(($(nproc) + 2)); ((workers < 4)) && workers=4; ((workers > 6)) && workers=6
        exec .venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder "$@" ;;
    shell) exec "$@" ;;
    *) echo "usage: scripts/dev.sh demo [--out DIR] | test [PYTEST ARGS] | shell CMD..." >&2; exit 2 ;;
esac
