#!/usr/bin/env bash
# Set up (or reuse) .venv at the repository root with everything the project needs, then
# run one of:  demo [ARGS]   |   test [PYTEST ARGS]   |   shell CMD...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

python_bin() {
    for c in python3.11 python3; do
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
        rm -rf "$root/python" "$root/.workbench-stamp"
        /usr/bin/python3.11 -m venv "$root/python"
        "$root/python/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
            -r images/runtime-requirements.txt \
            2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
        "$root/python/bin/python" -m pip check >/dev/null
        install -m 0644 images/TOOLS.md images/capabilities.json "$root/"
        "$root/python/bin/python" images/workbench_manifest.py "$root" images/workbench-packages.txt
        chmod -R a+rX "$root/python" "$root"/*.txt "$root"/*.json "$root/TOOLS.md"
        echo "$stamp" > "$root/.workbench-stamp"
    ) 9> "$root/.workbench-lock"
}

ensure_venv() {
    local py; py=$(python_bin)
    [[ -x .venv/bin/python ]] || "$py" -m venv .venv
    local stamp; stamp=$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)
    if [[ ! -f .venv/.dataspace-stamp || "$(cat .venv/.dataspace-stamp)" != "$stamp" ]]; then
        echo "installing the project into .venv (first run takes about a minute)" >&2
        # (the filter drops this machine's notes about absent local package folders)
        .venv/bin/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]' \
            2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
        echo "$stamp" > .venv/.dataspace-stamp
    fi
}

cmd="${1:-}"; shift || true
ensure_system_packages
ensure_workbench
ensure_venv
case "$cmd" in
    demo) exec .venv/bin/dataspace demo "$@" ;;
    test) exec .venv/bin/python -m pytest "$@" ;;
    shell) exec "$@" ;;
    *) echo "usage: scripts/dev.sh demo [--out DIR] | test [PYTEST ARGS] | shell CMD..." >&2; exit 2 ;;
esac
