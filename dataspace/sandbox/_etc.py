"""The local sandbox's ``/etc``: the workbench's own minimal one, never the host's.

A sandbox shows the host's ``/usr`` (the workbench's programs live there), but its ``/etc``
is generated here: users ``root`` and ``nobody`` only, ``localhost`` and the sandbox's own
host name, name lookups from files alone, UTC, and Debian's ``/etc/profile`` (commands run
in a login shell under the official profile, as in the official image, whose base is
Debian's). Nothing names the host, its users or its package sources (no ``apt``).

Four host entries are shown read-only on top, because they describe the ``/usr`` the
sandbox already sees and its programs need them: the dynamic loader's cache and
configuration (``ld.so.cache``, ``ld.so.conf``, ``ld.so.conf.d``), Debian's program
alternatives (``alternatives``: ``awk``, the BLAS libraries ...) and the fontconfig setup
(``fonts``: poppler's renderers and ffmpeg's text filters read it).

The generated folder is written once per content into the backend's state folder
(:func:`ensure`) and shown read-only at ``/etc`` by every sandbox, as the workspace is
(its host path appears nowhere in the sandbox's mount table); the host entries are bound
over their placeholders in it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

HOSTNAME = "sandbox"
"""The host name every sandbox has (its UTS namespace and ``/etc/hostname``)."""
FOLDER_PREFIX = "etc-"
"""Generated folders in the state folder are named ``etc-<content hash>``."""

_PROFILE = """\
# /etc/profile: system-wide .profile file for the Bourne shell (sh(1))
# and Bourne compatible shells (bash(1), ksh(1), ash(1), ...).

if [ "$(id -u)" -eq 0 ]; then
  PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
else
  PATH="/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"
fi
export PATH

if [ "${PS1-}" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    PS1='# '
  else
    PS1='$ '
  fi
fi
"""

FILES: dict[str, str] = {
    "passwd": (
        "root:x:0:0:root:/root:/bin/bash\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    ),
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hostname": f"{HOSTNAME}\n",
    "hosts": (
        f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{HOSTNAME}\n"
    ),
    "nsswitch.conf": (
        "passwd:         files\n"
        "group:          files\n"
        "shadow:         files\n"
        "hosts:          files\n"
        "networks:       files\n"
        "protocols:      files\n"
        "services:       files\n"
    ),
    "timezone": "Etc/UTC\n",
    "profile": _PROFILE,
}
"""The generated files, by name."""

LINKS: dict[str, str] = {
    "localtime": "/usr/share/zoneinfo/Etc/UTC",
    "os-release": "../usr/lib/os-release",
    "mtab": "../proc/self/mounts",
}
"""The generated symbolic links, by name (as Debian's image has them)."""

HOST_ENTRIES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts")
"""Host entries shown read-only over their placeholders (see the module docstring)."""


def _digest(host_etc: str) -> str:
    h = hashlib.sha256()
    for name in sorted(FILES):
        h.update(f"f\0{name}\0{FILES[name]}\0".encode())
    for name in sorted(LINKS):
        h.update(f"l\0{name}\0{LINKS[name]}\0".encode())
    for name in _carried(host_etc):
        h.update(f"h\0{name}\0{os.path.isdir(os.path.join(host_etc, name))}\0".encode())
    return h.hexdigest()[:16]


def _carried(host_etc: str) -> list[str]:
    return [name for name in HOST_ENTRIES if os.path.exists(os.path.join(host_etc, name))]


def ensure(state_dir: Path, host_etc: str = "/etc") -> Path:
    """The generated ``/etc`` folder under ``state_dir``, written if it is not there yet.

    Written into a temporary folder and renamed into place, so concurrent controllers
    sharing the state folder each see a complete one.

    Raises:
        OSError: the state folder is not writable.
    """
    final = state_dir / f"{FOLDER_PREFIX}{_digest(host_etc)}"
    if final.is_dir() and not final.is_symlink():
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{FOLDER_PREFIX}", dir=state_dir))
    for name, text in FILES.items():
        (tmp / name).write_text(text)
        (tmp / name).chmod(0o644)
    for name, target in LINKS.items():
        os.symlink(target, tmp / name)
    for name in _carried(host_etc):  # placeholders the host entries are bound over
        if os.path.isdir(os.path.join(host_etc, name)):
            (tmp / name).mkdir(mode=0o755)
        else:
            (tmp / name).touch(mode=0o644)
    tmp.chmod(0o755)
    try:
        tmp.rename(final)
    except OSError:  # another controller wrote it first: theirs has the same content
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return final


def ops(state_dir: Path, host_etc: str = "/etc") -> list[tuple[str, ...]]:
    """The sandbox init's operations that build ``/etc`` (see ``_init.py``)."""
    # shown as the workspace is (``hidden``): mountinfo names no host path
    out: list[tuple[str, ...]] = [("hidden", str(ensure(state_dir, host_etc)), "/etc")]
    for name in _carried(host_etc):
        out.append(("bind", os.path.join(host_etc, name), f"/etc/{name}"))
    return out


__all__ = ["FILES", "FOLDER_PREFIX", "HOSTNAME", "HOST_ENTRIES", "LINKS", "ensure", "ops"]
