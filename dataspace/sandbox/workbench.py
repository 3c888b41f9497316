"""The Data Workbench Runtime 1.0: where it lives and its manifest.

The workbench is what the paper's agents had inside their sandbox: the official workbench
image's command-line tools (``images/workbench-packages.txt``) and a Python 3.11 with its
data packages (``images/runtime-requirements.txt``), with ``/opt/dataspace/TOOLS.md`` and
``/opt/dataspace/capabilities.json``. ``scripts/dev.sh`` installs it on this host under
:data:`RUNTIME_ROOT` (the Python as a virtual environment at ``python/``, which the local
sandbox shows at ``/usr/local``, the official image's place); ``images/Dockerfile.runtime``
bakes the same lists into the runtime image. Both write ``runtime-manifest.json``
(``images/workbench_manifest.py``): package versions and the sha256 of ``TOOLS.md``.

Every attempt record carries the manifest's identity (:func:`manifest_identity`) and so
does the run fingerprint (each backend's ``SandboxBackend.runtime_identity``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataspace.errors import SandboxError

RUNTIME_ROOT = "/opt/dataspace"
MANIFEST_NAME = "runtime-manifest.json"
MANIFEST_PATH = f"{RUNTIME_ROOT}/{MANIFEST_NAME}"
"""Where an image (and the local sandbox's view) holds the manifest."""
MANIFEST_MAX_BYTES = 1024**2
"""The most of a manifest read from a sandbox image (a real one is a few KiB)."""
PYTHON_DIR = "python"
"""The workbench Python's virtual environment, under the runtime root."""
TOOLS_MANIFEST = f"{RUNTIME_ROOT}/TOOLS.md"
VISIBLE_FILES = (
    "TOOLS.md",
    "capabilities.json",
    "python-packages.txt",
    "system-packages.txt",
    MANIFEST_NAME,
)
"""What of the runtime root a sandbox sees at ``/opt/dataspace``: the official image's files
there, and the manifest."""

ENVIRONMENT = {
    "DATASPACE_TOOLS_MANIFEST": TOOLS_MANIFEST,
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}
"""The official workbench image's environment, set for every command."""

IDENTITY_KEYS = (
    "runtime",
    "runtime_version",
    "tools_sha256",
    "capabilities_sha256",
    "python",
    "python_packages_sha256",
    "system_packages_sha256",
)
"""The manifest keys a run's fingerprint records (``manifest_identity``)."""
_cache: dict[str, dict[str, Any]] = {}


def read_manifest(root: str | Path = RUNTIME_ROOT) -> dict[str, Any]:
    """The manifest of the workbench installed at ``root`` (read once per process).

    Raises:
        SandboxError: no workbench there, or its manifest is unreadable (the message says
            how to install it).
    """
    key = str(root)
    if key in _cache:
        return _cache[key]
    path = Path(root) / MANIFEST_NAME
    python = Path(root) / PYTHON_DIR / "bin" / "python3"
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SandboxError(
            f"Data Workbench Runtime: cannot read {path} ({exc}); install it with "
            "'scripts/dev.sh shell true' as root"
        ) from None
    if not isinstance(manifest, dict) or not python.exists():
        raise SandboxError(
            f"Data Workbench Runtime at {root}: incomplete (no {python} or a bad {path}); "
            "reinstall it with 'scripts/dev.sh shell true' as root"
        )
    _cache[key] = manifest
    return manifest


def parse_manifest(data: bytes) -> dict[str, Any]:
    """A manifest read from an image, parsed strictly (used where the bytes come from a pod).

    Raises:
        ValueError: not UTF-8 JSON, a duplicate key, not an object, or no runtime, version
            or TOOLS.md hash (the message says which).
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    manifest = json.loads(data.decode("utf-8"), object_pairs_hook=pairs, parse_constant=constant)
    if not isinstance(manifest, dict):
        raise ValueError("not a JSON object")
    for key in ("runtime", "runtime_version", "tools_sha256"):
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise ValueError(f"no {key}")
    return manifest


def manifest_identity(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What of a manifest decides results: runtime, TOOLS.md and package-list hashes.

    >>> manifest_identity({"runtime_version": "1.0", "tools_sha256": "ab", "other": 1})
    {'runtime_version': '1.0', 'tools_sha256': 'ab'}
    """
    return {key: manifest[key] for key in IDENTITY_KEYS if key in manifest}


__all__ = [
    "ENVIRONMENT",
    "IDENTITY_KEYS",
    "MANIFEST_MAX_BYTES",
    "MANIFEST_NAME",
    "MANIFEST_PATH",
    "RUNTIME_ROOT",
    "TOOLS_MANIFEST",
    "VISIBLE_FILES",
    "manifest_identity",
    "parse_manifest",
    "read_manifest",
]
