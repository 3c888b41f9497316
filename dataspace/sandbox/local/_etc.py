"""The local sandbox's ``/etc``: the workbench's own minimal one, never the host's.

A sandbox shows the host's ``/usr`` (the workbench's programs live there), but its ``/etc``
is generated here: users ``root`` and ``nobody`` only, ``localhost`` and the sandbox's own
host name, name lookups from files alone, UTC, and Debian's ``/etc/profile`` (commands run
in a login shell under the official profile, as in the official image, whose base is
Debian's). Nothing names the host, its users or its package sources (no ``apt``).

Host entries are shown read-only on top, because they describe the ``/usr`` the sandbox
already sees and its programs need them: the dynamic loader's cache and configuration
(``ld.so.cache``, ``ld.so.conf``, ``ld.so.conf.d``), Debian's program alternatives
(``alternatives``: ``awk``, the BLAS libraries ...), the fontconfig setup (``fonts``:
poppler's renderers and ffmpeg's text filters read it) and the Debian release of that
``/usr`` (``debian_version``, as a container of the runtime image shows it).

Each sandbox gets its own copy, written by :func:`ops` into its state folder (a few small
files, removed with the sandbox), shown read-only at ``/etc`` as the workspace is (its
host path appears nowhere in the sandbox's mount table); the host entries are bound over
their placeholders in it.
"""

from __future__ import annotations

import os
from pathlib import Path

HOSTNAME = "sandbox"
"""The host name every sandbox has (its UTS namespace and ``/etc/hostname``)."""

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

HOST_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "fonts",
    "debian_version",
)
"""Host entries shown read-only over their placeholders (see the module docstring)."""


def _carried(host_etc: str) -> list[str]:
    return [name for name in HOST_ENTRIES if os.path.exists(os.path.join(host_etc, name))]


def write(folder: Path, host_etc: str = "/etc") -> None:
    """Write the sandbox's ``/etc`` into ``folder`` (created; it must not exist yet).

    Raises:
        OSError: ``folder`` cannot be written.
    """
    folder.mkdir(mode=0o755)
    for name, text in FILES.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o644)
    for name, target in LINKS.items():
        os.symlink(target, folder / name)
    for name in _carried(host_etc):  # placeholders the host entries are bound over
        if os.path.isdir(os.path.join(host_etc, name)):
            (folder / name).mkdir(mode=0o755)
        else:
            (folder / name).touch(mode=0o644)
    folder.chmod(0o755)


def ops(folder: Path, host_etc: str = "/etc") -> list[tuple[str, ...]]:
    """Write the sandbox's ``/etc`` into ``folder``; return the init's operations for it.

    The operations are those of ``_init.py``: the folder, then the host entries over it.

    Raises:
        OSError: ``folder`` cannot be written.
    """
    write(folder, host_etc)
    # shown as the workspace is (``hidden``): mountinfo names no host path
    out: list[tuple[str, ...]] = [("hidden", str(folder), "/etc")]
    for name in _carried(host_etc):
        out.append(("bind", os.path.join(host_etc, name), f"/etc/{name}"))
    return out


__all__ = ["FILES", "HOSTNAME", "HOST_ENTRIES", "LINKS", "ops", "write"]
