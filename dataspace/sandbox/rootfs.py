"""The Debian 12 root every sandbox backend shows its agent.

``scripts/dev.sh`` makes it once with ``debootstrap`` (bookworm, the minimal base plus the
workbench's Debian packages, ``images/workbench-packages.txt``, and Debian's ``python3.11``,
the base of the workbench Python) at ``<runtime root>/root``, a link to the folder of the
current build. The local backend binds its ``/usr`` (and the ``/bin``-style links) and the
entries of its ``/etc`` that describe that ``/usr``, instead of the host's; the ``docker``
backend's runtime image is built on an image imported from it. So a host that is not
Debian 12 still shows the agent the paper's image's programs, and all backends show the
same files.
"""

from __future__ import annotations

import os
from pathlib import Path

from dataspace.errors import SandboxError

ROOT_DIR = "root"
"""The Debian root's folder (a link to the current build) under the runtime root."""


def debian_root(runtime_root: str | Path) -> Path:
    """The Debian 12 root under ``runtime_root``, resolved to its current build.

    Resolved once per backend: a rebuild swaps the link, a sandbox keeps the root it has.

    Raises:
        SandboxError: there is none (the message says how to make it).
    """
    root = Path(os.path.realpath(Path(runtime_root) / ROOT_DIR))
    if not (root / "usr" / "bin").is_dir() or not (root / "etc").is_dir():
        raise SandboxError(
            f"the sandboxes' Debian 12 root {Path(runtime_root) / ROOT_DIR} is missing; make "
            "it with 'scripts/dev.sh shell true' as root (debootstrap, a few minutes)"
        )
    return root


__all__ = ["ROOT_DIR", "debian_root"]
