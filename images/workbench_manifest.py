"""Write the Data Workbench Runtime manifest into its root folder (standard library only).

Run with the workbench's own Python once its packages are installed, by ``scripts/dev.sh``
for the local sandbox and by ``Dockerfile.runtime`` for the image:

    PYTHON images/workbench_manifest.py ROOT [PACKAGE_LIST]

``ROOT`` (``/opt/dataspace``) must already hold ``TOOLS.md`` and ``capabilities.json``;
``PACKAGE_LIST`` names the Debian packages of the workbench (``workbench-packages.txt``,
default: beside this script). Writes ``ROOT/python-packages.txt`` (``name==version``,
sorted), ``ROOT/system-packages.txt`` (``package<TAB>version``, sorted) and
``ROOT/runtime-manifest.json``: runtime name and version, the sha256 of ``TOOLS.md`` and
``capabilities.json``, the Python version, every Python and Debian package version, and
the sha256 of both package lists.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import subprocess
import sys
from pathlib import Path

RUNTIME = "Data Workbench Runtime"
RUNTIME_VERSION = "1.0"


def sha256(path: Path) -> str:
    """The hex sha256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def python_packages() -> dict[str, str]:
    """Every installed distribution of this Python, by normalized name."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def debian_packages(names: list[str]) -> dict[str, str]:
    """The installed version of each Debian package (``missing`` when not installed)."""
    found: dict[str, str] = {}
    for name in names:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", name],
            capture_output=True,
            text=True,
            check=False,
        )
        found[name] = done.stdout.strip() if done.returncode == 0 else "missing"
    return dict(sorted(found.items()))


def main(argv: list[str]) -> int:
    """Write the three files; 1 when a workbench package is missing."""
    if not argv:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    root = Path(argv[0])
    listing = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("workbench-packages.txt")
    names = [
        line.split("#", 1)[0].strip()
        for line in listing.read_text().splitlines()
        if line.split("#", 1)[0].strip()
    ]
    python = python_packages()
    system = debian_packages(names)
    missing = [name for name, version in system.items() if version == "missing"]
    if missing:
        print(f"workbench: Debian packages not installed: {' '.join(missing)}", file=sys.stderr)
        return 1
    py_text = "".join(f"{name}=={version}\n" for name, version in python.items())
    sys_text = "".join(f"{name}\t{version}\n" for name, version in system.items())
    (root / "python-packages.txt").write_text(py_text)
    (root / "system-packages.txt").write_text(sys_text)
    manifest = {
        "runtime": RUNTIME,
        "runtime_version": RUNTIME_VERSION,
        "tools_sha256": sha256(root / "TOOLS.md"),
        "capabilities_sha256": sha256(root / "capabilities.json"),
        "python": platform.python_version(),
        "python_packages": python,
        "system_packages": system,
        "python_packages_sha256": hashlib.sha256(py_text.encode()).hexdigest(),
        "system_packages_sha256": hashlib.sha256(sys_text.encode()).hexdigest(),
    }
    temp = root / "runtime-manifest.json.tmp"
    temp.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    temp.replace(root / "runtime-manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
