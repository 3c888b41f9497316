"""Host helper processes under a memory-limited control group of their own.

Some work on untrusted input happens on the controller's host, outside any sandbox: the
image decoding of ``view_image`` must use the official tool's own Pillow, so it cannot run
in the attempt's sandbox. :func:`run` starts such a helper in a fresh group (one per call,
inside the controller's own group, beside the local sandboxes' groups: ``_cgroup.py``)
whose memory, process and CPU limits it writes first; the helper joins the group before
it starts, so everything it allocates is charged there and an overrun is the kernel's OOM
kill of the helper alone, not the controller's memory. The group is removed when the
helper ends, and its name carries the controller's identity so a sweep removes it if the
controller dies first.

Where no cgroup hierarchy is writable (an unprivileged host, a cluster worker without
delegation), the helper runs without one and ``Confined.group`` is ``None``: the caller
keeps its own fallback bound (``RLIMIT_AS`` in the helper).
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from dataspace.errors import SandboxError
from dataspace.limits import Limits
from dataspace.sandbox import _procfs
from dataspace.sandbox.local import _cgroup

logger = logging.getLogger(__name__)

PIDS = 64
"""Processes and threads a helper may have (Pillow's decoders use a few threads)."""

_layout_lock = threading.Lock()
_layout: list[_cgroup.CgroupLayout | None] = []  # the layout, once detected


@dataclass(frozen=True, kw_only=True)
class Confined:
    """How a confined helper ended.

    Attributes:
        returncode: its exit status (negative: the signal that killed it).
        stdout: what it wrote on stdout.
        stderr: what it wrote on stderr.
        group: the group's name, or None when it ran without one.
        memory_limit: the group's memory limit in bytes (None without a group).
        memory_peak: the most memory the group held, in bytes (None when unknown).
        oom_killed: the kernel killed it at the group's memory limit.
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    group: str | None
    memory_limit: int | None
    memory_peak: int | None
    oom_killed: bool


def _group_layout() -> _cgroup.CgroupLayout | None:
    with _layout_lock:
        if not _layout:
            try:
                _layout.append(_cgroup.detect())
            except OSError as exc:
                logger.debug("no cgroups for helpers: %s", exc)
                _layout.append(None)
        return _layout[0]


def available() -> bool:
    """Whether helpers get a group of their own on this host."""
    return _group_layout() is not None


# Joins the groups named by the first N arguments, then runs the rest: the helper is in its
# group before its first allocation.
_JOIN = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done; '
    'exec "$@"'
)


def run(
    argv: list[str],
    *,
    input: bytes,
    memory_bytes: int,
    timeout: float,
    env: dict[str, str] | None = None,
    cpus: float = 1.0,
) -> Confined:
    """Run ``argv`` with ``input`` on stdin in a group limited to ``memory_bytes``.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` (it was killed).
        SandboxError: the group could not be set up.
    """
    layout = _group_layout()
    if layout is None:
        done = subprocess.run(
            argv, input=input, capture_output=True, timeout=timeout, check=False, env=env or {}
        )
        return Confined(
            returncode=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            group=None,
            memory_limit=None,
            memory_peak=None,
            oom_killed=False,
        )
    me = os.getpid()
    name = _cgroup.group_name(f"helper-{secrets.token_hex(4)}", me, _procfs.start_time(me) or 0)
    limits = Limits(memory_bytes=memory_bytes, pids=PIDS, cpus=cpus)
    group = _cgroup.SandboxCgroup(layout, name, limits)
    try:
        files = group.join_files(0)
        cmd = ["/bin/sh", "-c", _JOIN, "sh", str(len(files)), *files, *argv]
        try:
            done = subprocess.run(
                cmd, input=input, capture_output=True, timeout=timeout, check=False, env=env or {}
            )
        finally:
            group.kill_all()
        if done.returncode == 125 and not done.stdout:
            raise SandboxError(f"helper group {name}: cannot join it: {done.stderr[-300:]!r}")
        ooms, _ = group.counters(0)
        peak = _peak(group.paths["memory"])
        group.release_exec(0)
    finally:
        group.remove()
    logger.debug(
        "helper %s in group %s: exit %s, memory peak %s of %s bytes, oom kills %s",
        argv[0], name, done.returncode, peak, memory_bytes, ooms,
    )  # fmt: skip
    return Confined(
        returncode=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
        group=name,
        memory_limit=memory_bytes,
        memory_peak=peak,
        oom_killed=ooms > 0,
    )


def _peak(folder: Path) -> int | None:
    for name in ("memory.peak", "memory.max_usage_in_bytes"):  # v2, v1
        try:
            return int((folder / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return None


__all__ = ["PIDS", "Confined", "available", "run"]
