"""Talking to the Docker daemon through its command-line client, and to a container by exec.

The backend drives the daemon with the ``docker`` client only (no SDK to install; every
call is one short process): nothing of a container is read from this host's ``/proc`` or
``/sys``, so the controller needs no root and need not share a kernel with the daemon (a
user in the ``docker`` group, or Docker Desktop's virtual machine). Inside a container the
controller runs two small programs of its own through ``docker exec``: the bash wrapper of
every command (``RUN_WRAPPER``) and the file helper (``_inside.py``).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import shutil
import socket
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

from dataspace.errors import SandboxError
from dataspace.sandbox import _procfs

CALL_TIMEOUT_SECONDS = 120.0
"""The longest one client call (``run``, ``rm``, ``inspect``) may take."""
EXEC_REFUSED = "OCI runtime exec failed"
"""How the client says a process could not start in a container (its pids limit is full)."""


def client(name: str = "docker") -> str:
    """The path of the ``docker`` client, or a ``SandboxError`` saying how to install it."""
    found = shutil.which(name)
    if found is None:
        raise SandboxError(
            f"docker sandbox backend: no {name!r} client on PATH; install Debian's docker.io "
            "(scripts/dev.sh does) or Docker Desktop"
        )
    return found


def call(
    docker: str, *args: str, timeout: float = CALL_TIMEOUT_SECONDS, stdin: bytes | None = None
) -> str:
    """Run ``docker ARGS``; its stdout, or a ``SandboxError`` with its stderr's last line."""
    return call_bytes(docker, *args, timeout=timeout, stdin=stdin).decode(errors="replace")


def call_bytes(
    docker: str, *args: str, timeout: float = CALL_TIMEOUT_SECONDS, stdin: bytes | None = None
) -> bytes:
    """As :func:`call`, stdout as bytes."""
    try:
        done = subprocess.run(
            [docker, *args],
            capture_output=True,
            timeout=timeout,
            check=False,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"docker {args[0]}: {exc}") from exc
    if done.returncode != 0:
        text = done.stderr.decode(errors="replace").strip()
        lines = text.splitlines() or [f"exit code {done.returncode}"]
        raise SandboxError(f"docker {args[0]}: {lines[-1]}")
    return done.stdout


def daemon_facts(docker: str) -> dict[str, Any]:
    """The daemon's version, CPUs and memory (of the machine that runs the containers).

    Raises:
        SandboxError: in one line, why the daemon cannot be reached and what to do.
    """
    try:
        text = call(docker, "info", "--format", "{{json .}}", timeout=30)
        facts = json.loads(text)
    except ValueError:
        facts = {}
    except SandboxError as exc:
        raise SandboxError(f"docker sandbox backend: no Docker daemon answers ({exc}); "
                           f"{_reach_hint(str(exc))}") from None  # fmt: skip
    if not facts.get("ServerVersion"):
        errors = "; ".join(facts.get("ServerErrors") or []) or "no server in 'docker info'"
        raise SandboxError(f"docker sandbox backend: no Docker daemon answers ({errors}); "
                           f"{_reach_hint(errors)}")  # fmt: skip
    return {
        "version": str(facts["ServerVersion"]),
        "cpus": int(facts.get("NCPU") or 0),
        "memory_bytes": int(facts.get("MemTotal") or 0),
        "os": str(facts.get("OperatingSystem") or ""),
    }


def _reach_hint(error: str) -> str:
    if "permission denied" in error.lower():
        return ("this user may not use the daemon's socket: add it to the socket's group "
                "('usermod -aG docker USER', then log in again) or point DOCKER_HOST at a "
                "daemon it may use")  # fmt: skip
    return "start the daemon (scripts/dev.sh does, as root; or Docker Desktop) or set DOCKER_HOST"


# -- the controller's identity, for sweep ----------------------------------------------


def _start_ticks(pid: int) -> str | None:
    ticks = _procfs.start_time(pid)
    return None if ticks is None else str(ticks)


def controller_identity(pid: int | None = None) -> tuple[str, str]:
    """(``<pid>:<start time>``, host name) of a controller process.

    The start time (clock ticks since boot) comes from ``/proc`` where there is one; ``-``
    elsewhere (a controller on macOS), where the pid alone names the process.
    """
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_ticks(pid) or '-'}", socket.gethostname()


def controller_alive(identity: str, host: str | None) -> bool:
    """Whether the controller named by :func:`controller_identity` may still run.

    A controller of another host (a daemon shared through ``DOCKER_HOST``) counts as alive:
    this host cannot tell.
    """
    if host and host != socket.gethostname():
        return True
    pid, _, started = identity.partition(":")
    if not pid.isdigit() or not started:
        return False
    if started != "-":
        return _start_ticks(int(pid)) == started
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- programs run inside a container ------------------------------------------------------

TRAILER = b"\0dsx:"
"""Starts the wrapper's report at the end of a command's stderr (with the exec's token)."""

RUN_WRAPPER = r"""
set -f
exec 3>&2 2>/dev/null 4<&0 0</dev/null
limit=$1 token=$2
shift 2
read -r line < /proc/self/stat
fields=(${line##*) })
since=${fields[19]}
counters() {
  local path key value
  oom=-1 refused=-1
  for path in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do
    [[ -r $path ]] || continue
    while read -r key value; do [[ $key == oom_kill ]] && oom=$value; done < "$path"
    break
  done
  for path in /sys/fs/cgroup/pids.events /sys/fs/cgroup/pids/pids.events; do
    [[ -r $path ]] || continue
    while read -r key value; do [[ $key == max ]] && refused=$value; done < "$path"
    break
  done
}
kill_since() {
  local round stat pid found quiet=0
  for ((round = 0; round < 500; round++)); do
    ((quiet)) && read -r -t 0.05 -u 4 _
    found=0
    set +f
    stats=(/proc/[0-9]*/stat)
    set -f
    for stat in "${stats[@]}"; do
      read -r line < "$stat" || { found=1; continue; }
      pid=${stat#/proc/}
      pid=${pid%/stat}
      ((pid == $$)) && continue
      fields=(${line##*) })
      [[ ${fields[0]} == [ZX] ]] && continue
      ((fields[19] >= since)) || continue
      kill -9 "$pid" 2>/dev/null && found=1
    done
    ((found)) && quiet=0 || ((++quiet < 3)) || return 0
  done
}
counters
oom0=$oom refused0=$refused
timed_out=0
trap 'timed_out=1' USR1
wrapper=$$
(read -r -t "$limit" -u 4 _; kill -USR1 "$wrapper") > /dev/null &
timer=$!
"$@" 2>&3 3>&- 4<&- &
command=$!
wait "$command"
code=$?
if ((timed_out)); then
  kill_since
else
  kill -9 "$timer" 2>/dev/null
fi
counters
if ((timed_out == 0 && refused > refused0)); then
  kill_since
fi
wait
printf '\0dsx:%s %s %s %s %s %s %s\n' "$token" "$timed_out" "$code" "$oom0" "$oom" \
  "$refused0" "$refused" >&3
exit "$code"
"""
"""The bash wrapper of every command: ``bash -c RUN_WRAPPER dsx-run LIMIT TOKEN ARGV...``.

Its stdin is a pipe the controller holds open and never writes: the wrapper's timer is a
``read`` of it with a timeout in a subshell (so no ``sleep`` process shows in the
container), which then signals the wrapper out of its ``wait``.
It runs the command with stdin from ``/dev/null``; at the limit (or when the command's forks
were refused by the pids limit) it kills, with builtins only (no fork, so a full pids
limit cannot stop it), every process of the container started since the command began,
a daemon the command left behind included, in rounds until three in a row, 50 ms apart,
find none left (under load a fork bomb's process can be listed in ``/proc`` but not yet
readable, or appear after a round found nothing: a round that meets an unreadable entry
is not a quiet one). It then appends to stderr ``TRAILER``, the
token, and: timed out (0/1), the command's exit code, the OOM-kill and refused-fork
counters of the container's own cgroup before and after (-1 where not readable).
"""

KILL_ALL = r"""
for ((round = 0; round < 2000; round++)); do
  kill -9 -1 2>/dev/null || exit 0
  left=0
  for dir in /proc/[0-9]*; do
    [[ ${dir#/proc/} == "$$" || ! -O $dir ]] && continue
    read -r line < "$dir/stat" 2>/dev/null || continue
    fields=(${line##*) })
    [[ ${fields[0]} == [ZX] ]] || { left=1; break; }
  done
  ((left)) || exit 0
done
exit 1
"""
"""Kills every process of the calling user but itself (``bash -c KILL_ALL``) until none
but zombies is left; the container's init and keeper run as root and are spared.
Builtins only."""


@functools.cache
def helper_argv() -> tuple[str, ...]:
    """The argv prefix that runs the file helper (``_inside.py``) with the image's python3."""
    from dataspace.sandbox._outputfs import sandbox_program

    source = sandbox_program(Path(__file__).parent / "_inside.py").encode()
    packed = base64.b64encode(zlib.compress(source, 9)).decode()
    boot = f"import base64,zlib;exec(zlib.decompress(base64.b64decode('{packed}')))"
    return ("python3", "-I", "-S", "-c", boot)


def exec_bytes(
    docker: str, *args: str, stdin: bytes | None = None, timeout: float = CALL_TIMEOUT_SECONDS
) -> subprocess.CompletedProcess[bytes]:
    """``docker exec ARGS``, run again while the container refuses to start it.

    A container refuses an exec while its pids limit is full; what is forking there may
    free a slot, so the exec is tried again for at most ``timeout`` seconds.

    Raises:
        SandboxError: the client could not run, or the exec never started.
    """
    end = time.monotonic() + timeout
    while True:
        try:
            done = subprocess.run(
                [docker, "exec", *args],
                capture_output=True,
                timeout=max(1.0, end - time.monotonic()),
                check=False,
                input=stdin,
                stdin=None if stdin is not None else subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"docker exec: {exc}") from exc
        refused = done.returncode != 0 and EXEC_REFUSED.encode() in done.stderr
        if not refused:
            return done
        if time.monotonic() >= end:
            raise SandboxError(f"docker exec: {done.stderr.decode(errors='replace').strip()}")
        time.sleep(0.05)


__all__ = [
    "CALL_TIMEOUT_SECONDS",
    "EXEC_REFUSED",
    "KILL_ALL",
    "RUN_WRAPPER",
    "TRAILER",
    "call",
    "call_bytes",
    "client",
    "controller_alive",
    "controller_identity",
    "daemon_facts",
    "exec_bytes",
    "helper_argv",
]
