"""Processes of this host as ``/proc`` shows them, for the backends that run on it.

A pid alone is not an identity: after a crash the number may belong to someone else. The
pair (pid, start time in clock ticks since boot) is, so records store both and every kill
of a recorded process checks the pair first.
"""

from __future__ import annotations

import os
from pathlib import Path


def stat_fields(pid: int) -> list[bytes] | None:
    """Fields 3 and on of ``/proc/<pid>/stat`` (after the command name), or ``None``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its end.
    return text[text.rindex(b")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or ``None`` if it is gone.

    >>> start_time(os.getpid()) is not None
    True
    """
    fields = stat_fields(pid)
    return None if fields is None else int(fields[19])


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not dead (a zombie, ``Z``, or exiting, ``X``).

    >>> running(os.getpid())
    True
    """
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def alive(pid: int | None, started: int | None) -> bool:
    """Whether the process identified by (pid, start time) still runs."""
    return pid is not None and started is not None and start_time(pid) == started


def pid_namespace(pid: int) -> int | None:
    """The inode of the PID namespace of ``pid``, or ``None`` if it is gone."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def now_ticks() -> int:
    """Clock ticks since boot now (the unit of a process's start time)."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return int(uptime * os.sysconf("SC_CLK_TCK"))


__all__ = ["alive", "now_ticks", "pid_namespace", "running", "start_time", "stat_fields"]
