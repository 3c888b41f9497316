"""The host checks of the local backend: the workbench it shows its sandboxes.

``dataspace doctor`` and the preflight of a run on the local backend make them
(``LocalBackend.host_checks``).
"""

from __future__ import annotations

import glob
import hashlib
import shutil
from pathlib import Path

from dataspace.errors import ConfigError
from dataspace.sandbox.workbench import IDENTITY_KEYS, MANIFEST_NAME, read_manifest

# each workbench tool the paper lists, and the Debian package that brings it
WORKBENCH_PROGRAMS = {
    "pdftotext": "poppler-utils",
    "ffprobe": "ffmpeg",
    "tesseract": "tesseract-ocr",
    "rg": "ripgrep",
    "jq": "jq",
    "sqlite3": "sqlite3",
}
TESSERACT_LANGUAGES = {"eng": "tesseract-ocr-eng", "chi_sim": "tesseract-ocr-chi-sim"}
_SANDBOX_PATH = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # the local sandbox's PATH
_TESSDATA_GLOBS = ("/usr/share/tesseract-ocr/*/tessdata", "/usr/share/tessdata")
_WORKBENCH_FIX = "reinstall the workbench: scripts/dev.sh shell true (as root)"


def check_workbench(root: str) -> str:
    """The local workbench at ``root``: its manifest is complete and its tools are there.

    The manifest (``runtime-manifest.json``) must name the runtime and carry every hash
    the run fingerprint records, match the ``TOOLS.md`` and ``capabilities.json`` beside
    it, and list every workbench package as installed; the programs (``pdftotext``,
    ``ffprobe``, ``tesseract`` with ``eng`` and ``chi_sim``, ``rg``, ``jq``, ``sqlite3``)
    must be on the sandbox's ``PATH``.

    Raises:
        SandboxError: no workbench at ``root`` (the message says how to install it).
        ConfigError: an incomplete manifest or a missing tool (one line with the fix).
    """
    manifest = read_manifest(root)
    where = f"{root}/{MANIFEST_NAME}"
    absent = [k for k in IDENTITY_KEYS if not manifest.get(k)]
    if absent:
        raise ConfigError(
            f"workbench manifest {where} is incomplete (no {', '.join(absent)}); {_WORKBENCH_FIX}"
        )
    for name, key in (("TOOLS.md", "tools_sha256"), ("capabilities.json", "capabilities_sha256")):
        try:
            digest = hashlib.sha256(Path(root, name).read_bytes()).hexdigest()
        except OSError:
            digest = "absent"
        if digest != manifest[key]:
            raise ConfigError(
                f"workbench {root}/{name} does not match its manifest {where} ({key}); "
                f"{_WORKBENCH_FIX}"
            )
    packages = manifest.get("system_packages") or {}
    missing = [
        f"{prog} ({pkg})"
        for prog, pkg in WORKBENCH_PROGRAMS.items()
        if packages.get(pkg, "missing") == "missing" or not shutil.which(prog, path=_SANDBOX_PATH)
    ]
    tessdata = [d for pattern in _TESSDATA_GLOBS for d in glob.glob(pattern)]
    missing += [
        f"tesseract language {lang} ({pkg})"
        for lang, pkg in TESSERACT_LANGUAGES.items()
        if packages.get(pkg, "missing") == "missing"
        or not any(Path(d, f"{lang}.traineddata").is_file() for d in tessdata)
    ]
    if missing:
        raise ConfigError(f"workbench tools missing: {', '.join(missing)}; {_WORKBENCH_FIX}")
    tools = ", ".join(
        f"{prog} {packages[pkg].split(':')[-1].split('-')[0]}"
        for prog, pkg in WORKBENCH_PROGRAMS.items()
    )
    return (
        f"{manifest['runtime']} {manifest['runtime_version']} at {root}: Python "
        f"{manifest['python']}, {len(manifest.get('python_packages') or {})} Python packages; "
        f"tools {tools}; tesseract languages {', '.join(TESSERACT_LANGUAGES)}"
    )


__all__ = ["TESSERACT_LANGUAGES", "WORKBENCH_PROGRAMS", "check_workbench"]
