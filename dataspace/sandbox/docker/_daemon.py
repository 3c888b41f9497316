"""Talking to the Docker daemon through its command-line client, and reading a container from /proc.

The backend drives Debian's ``docker.io`` daemon with the ``docker`` client (no SDK to
install; every call is one short process). A container's processes, cgroups and files are
read on this host through ``/proc/<pid>``: the controller runs as root beside the daemon.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from dataspace.errors import SandboxError
from dataspace.sandbox import _procfs

CALL_TIMEOUT_SECONDS = 120.0
"""The longest one client call (``run``, ``rm``, ``inspect``) may take."""


def client(name: str = "docker") -> str:
    """The path of the ``docker`` client, or a ``SandboxError`` saying how to install it."""
    found = shutil.which(name)
    if found is None:
        raise SandboxError(
            f"docker sandbox backend: no {name!r} client on PATH; install Debian's docker.io "
            "(scripts/dev.sh does, as root)"
        )
    return found


def call(docker: str, *args: str, timeout: float = CALL_TIMEOUT_SECONDS) -> str:
    """Run ``docker ARGS``; its stdout, or a ``SandboxError`` with its stderr's last line."""
    try:
        done = subprocess.run(
            [docker, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"docker {args[0]}: {exc}") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
        raise SandboxError(f"docker {args[0]}: {lines[-1]}")
    return done.stdout


def members(namespace: int) -> Iterator[tuple[int, int]]:
    """(pid, start time) of every live process of a PID namespace, as this host sees them."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if _procfs.pid_namespace(pid) != namespace:
            continue
        fields = _procfs.stat_fields(pid)
        if fields is not None and fields[0] not in (b"Z", b"X"):
            yield pid, int(fields[19])


def cgroup_files(pid: int) -> dict[str, Path]:
    """The cgroup folders of ``pid`` by controller (``memory``, ``pids``; v1 or v2)."""
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if not controllers:  # the unified hierarchy (v2)
                for name in ("memory", "pids"):
                    found.setdefault(name, Path("/sys/fs/cgroup") / path.lstrip("/"))
                continue
            for name in controllers.split(","):
                if name in ("memory", "pids"):
                    found[name] = Path("/sys/fs/cgroup") / name / path.lstrip("/")
    return found


def _counter(path: Path, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


def limit_counters(groups: dict[str, Path]) -> tuple[int, int]:
    """(OOM kills, refused forks) of a container's cgroups so far."""
    memory = groups.get("memory")
    oom = 0
    if memory is not None:
        oom = _counter(memory / "memory.oom_control", "oom_kill") or _counter(
            memory / "memory.events", "oom_kill"
        )
    pids = groups.get("pids")
    return oom, _counter(pids / "pids.events", "max") if pids is not None else 0


__all__ = [
    "CALL_TIMEOUT_SECONDS",
    "call",
    "cgroup_files",
    "client",
    "limit_counters",
    "members",
]
