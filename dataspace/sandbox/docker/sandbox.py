"""One attempt's container: the official baseline's ``docker run``, commands by ``docker exec``.

**Create.** ``docker run --detach --init`` with the official baseline's flags (network
``none``, read-only root, every capability dropped, ``no-new-privileges``, the pids, CPU
and memory limits, a size-limited tmpfs at ``/tmp``) and ours: a size-limited tmpfs at
``/output`` owned by the sandbox user (the official runner bind-mounts a host folder
with no bound), the workspace bound read-only at ``/workspace``, the relay folder
read-only at ``RELAY_DIR`` (``--network none`` keeps the loopback interface, so a
forwarder inside can listen on 127.0.0.1), a harness's install read-only under ``/opt``,
the environment of the official image and labels naming the controller (pid and start
time) for ``sweep``. The container's PID 1 is Docker's init, which reaps orphans and runs
``sleep infinity`` (the keeper); both run as root without a capability, so the sandbox
user cannot signal them (a harness's ``kill -9 -1`` leaves the container up).

**Exec.** ``docker exec --user 65534:65534`` with the command's folder and variables. At
its limit the controller kills, from this host, every process of the container started
since the command began (the keeper spared), so a daemon the command left behind dies
too; OOM kills and refused forks are read from the container's cgroup counters.

**Files.** As the local backend: through a descriptor of ``/proc/<init>/root/output``
opened once, one component at a time, no link followed (``_paths.OutputRoot``).
``collect`` first stops every process but the init and the keeper.

**Deadline.** A timer stops every command at ``Limits.wall_seconds`` after the
container is ready; later commands are refused by the base class.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import secrets
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dataspace.errors import SandboxError
from dataspace.sandbox import _procfs, workbench
from dataspace.sandbox._paths import OutputRoot
from dataspace.sandbox.base import (
    OUTPUT_DIR,
    RELAY_DIR,
    TMP_DIR,
    WORKSPACE_DIR,
    ExecPlan,
    ExecResult,
    Sandbox,
    SandboxSpec,
    exec_status,
)
from dataspace.sandbox.docker import _daemon

if TYPE_CHECKING:
    from dataspace.sandbox.docker.backend import DockerBackend

logger = logging.getLogger(__name__)

LABEL = "org.dataspace.sandbox"
"""The label every container of the backend has (its sandbox id)."""
CONTROLLER_LABEL = "org.dataspace.controller"
"""``<pid>:<start time>`` of the controller that made the container."""
LABEL_PREFIX = "org.dataspace.label."
"""Prefix of the spec's labels (run, agent, task, attempt) on the container."""
CAPTURE_BYTES = 8 * 1024**2
"""Stdout and stderr each keep at most this much of a command's output."""
KILL_GRACE_SECONDS = 2.0
"""How long a killed command's client may take to return before it is killed too."""
HOSTNAME = "sandbox"
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_DAEMON_ERRORS = ("Error response from daemon:", "Error: No such container")


class _Capture(threading.Thread):
    """Reads a stream to its end, keeping the first ``CAPTURE_BYTES``."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.data = bytearray()
        self.dropped = 0

    def run(self) -> None:
        fd = self.stream.fileno()
        while chunk := os.read(fd, 65536):
            room = CAPTURE_BYTES - len(self.data)
            self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        return text + (f"\n[{self.dropped} more bytes not kept]" if self.dropped else "")


class DockerSandbox(Sandbox):
    """One live container; create it with ``DockerBackend.create``.

    Raises:
        SandboxError: the container could not start (the message has the daemon's words).
    """

    def __init__(self, backend: DockerBackend, spec: SandboxSpec) -> None:
        started = time.monotonic()
        super().__init__(sandbox_id=f"dsb-{secrets.token_hex(6)}", limits=spec.limits)
        self._backend = backend
        self.labels = dict(spec.labels)
        self.image = spec.image or backend.image
        self._relay = spec.relay_dir is not None
        self._files_lock = threading.Lock()
        self._output: OutputRoot | None = None
        self._output_fd: int | None = None
        self._timer: threading.Timer | None = None
        self._running: dict[int, int] = {}
        workspace = Path(spec.workspace).resolve()
        if not workspace.is_dir():
            raise SandboxError(f"sandbox workspace {spec.workspace}: not a folder")
        self.cpus = backend.cpus_for(self.limits.cpus)
        try:
            self._init_pid, self._init_start = self._run(spec, workspace)
            self._namespace = _procfs.pid_namespace(self._init_pid)
            self._keeper = self._keeper_of(self._init_pid)
            self._groups = _daemon.cgroup_files(self._init_pid)
            root = f"/proc/{self._init_pid}/root"
            self.runtime = workbench.manifest_identity(
                workbench.parse_manifest(Path(root + workbench.MANIFEST_PATH).read_bytes())
            )
            flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            self._output_fd = os.open(root + OUTPUT_DIR, flags)
        except (OSError, ValueError) as exc:
            self._remove()
            raise SandboxError(f"sandbox {self.id}: cannot read its container: {exc}") from exc
        except BaseException:
            self._remove()
            raise
        uid = backend.uid
        self._output = OutputRoot(fd=self._output_fd, owner=(uid, uid))
        self.start_clock()
        self._timer = threading.Timer(self.limits.wall_seconds, self._at_deadline)
        self._timer.daemon = True
        self._timer.start()
        self._timings = {"create_seconds": time.monotonic() - started}
        logger.debug("sandbox %s: container started in %.3fs", self.id, time.monotonic() - started)

    # -- creation and teardown -------------------------------------------------------

    def _run_argv(self, spec: SandboxSpec, workspace: Path) -> list[str]:
        backend, limits, uid = self._backend, self.limits, self._backend.uid
        env = {
            "PATH": _SYSTEM_PATH,
            "HOME": TMP_DIR,
            "LANG": "C.UTF-8",
            "TMPDIR": TMP_DIR,
            **workbench.ENVIRONMENT,
            **spec.env,
        }
        argv = [
            backend.docker, "run", "--detach", "--init", "--name", self.id,
            "--network", "none", "--read-only", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", "--ipc", "private",
            "--pids-limit", str(limits.pids), "--cpus", f"{self.cpus:g}",
            "--memory", f"{limits.memory_bytes}b", "--memory-swap", f"{limits.memory_bytes}b",
            "--user", "0:0", "--hostname", HOSTNAME, "--workdir", OUTPUT_DIR,
            "--tmpfs", f"{TMP_DIR}:rw,nosuid,nodev,size={limits.tmp_bytes},mode=1777",
            "--tmpfs", f"{OUTPUT_DIR}:rw,nosuid,nodev,size={limits.output_bytes},mode=0755,"
                       f"uid={uid},gid={uid}",
            "--mount", f"type=bind,src={workspace},dst={WORKSPACE_DIR},readonly",
            "--label", f"{LABEL}={self.id}",
            "--label", f"{CONTROLLER_LABEL}={backend.controller}",
        ]  # fmt: skip
        for key, value in self.labels.items():
            argv += ["--label", f"{LABEL_PREFIX}{key}={value}"]
        for host, inside in spec.runtime_binds:
            if not os.path.isdir(host) or not inside.startswith("/opt/"):
                raise SandboxError(
                    f"sandbox {self.id}: runtime bind {host} -> {inside}: "
                    "needs an existing host folder and a path under /opt"
                )
            argv += ["--mount", f"type=bind,src={os.path.realpath(host)},dst={inside},readonly"]
        if spec.relay_dir is not None:
            relay = Path(spec.relay_dir).resolve()
            argv += ["--mount", f"type=bind,src={relay},dst={RELAY_DIR},readonly"]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        return [*argv, "--entrypoint", "sleep", self.image, "infinity"]

    def _run(self, spec: SandboxSpec, workspace: Path) -> tuple[int, int]:
        backend = self._backend
        _daemon.call(backend.docker, *self._run_argv(spec, workspace)[1:])
        state = json.loads(
            _daemon.call(backend.docker, "inspect", "--format", "{{json .State}}", self.id)
        )
        pid = int(state.get("Pid") or 0)
        started = _procfs.start_time(pid) if pid else None
        if not state.get("Running") or started is None:
            raise SandboxError(f"sandbox {self.id}: its container is not running ({state})")
        return pid, started

    @staticmethod
    def _keeper_of(init: int) -> tuple[int, int] | None:
        """The init's child that keeps the container alive (``sleep infinity``)."""
        with contextlib.suppress(OSError, ValueError):
            for task in os.listdir(f"/proc/{init}/task"):
                children = Path(f"/proc/{init}/task/{task}/children").read_text().split()
                for child in children:
                    started = _procfs.start_time(int(child))
                    if started is not None:
                        return int(child), started
        return None

    def _remove(self) -> None:
        with self._files_lock:
            if self._output_fd is not None:
                os.close(self._output_fd)
                self._output_fd = None
        try:
            _daemon.call(self._backend.docker, "rm", "--force", "--volumes", self.id)
        except SandboxError as exc:
            if "No such container" not in str(exc):
                logger.warning("sandbox %s: cannot remove its container: %s", self.id, exc)

    def close(self) -> None:
        """Remove the container (and so every process and mount of it); idempotent."""
        if not self._mark_closed():
            return
        if self._timer is not None:
            self._timer.cancel()
        self._remove()
        logger.debug("sandbox %s closed", self.id)

    def _at_deadline(self) -> None:
        with contextlib.suppress(SandboxError):
            if not self.closed:
                self.stop_processes()

    # -- commands --------------------------------------------------------------------

    def _spared(self) -> set[int]:
        spared = {self._init_pid}
        if self._keeper is not None:
            spared.add(self._keeper[0])
        return spared

    def _kill_since(self, since: int) -> None:
        """Kill every process of the container started at or after ``since`` (ticks)."""
        if self._namespace is None:
            return
        spared = self._spared()
        for _ in range(200):  # what a fork loop makes meanwhile dies in a later round
            members = _daemon.members(self._namespace)
            found = [pid for pid, start in members if start >= since and pid not in spared]
            if not found:
                return
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def stop_processes(self) -> None:
        """Kill every process of the container but its init and keeper."""
        self._kill_since(0)

    def _exec(self, plan: ExecPlan) -> ExecResult:
        backend = self._backend
        argv = [backend.docker, "exec", "--user", f"{backend.uid}:{backend.uid}",
                "--workdir", plan.cwd]  # fmt: skip
        for key, value in plan.env.items():
            argv += ["--env", f"{key}={value}"]
        argv += [self.id, *plan.argv]
        before = _daemon.limit_counters(self._groups)
        since = _procfs.now_ticks()
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        out, err = _Capture(proc.stdout), _Capture(proc.stderr)
        out.start()
        err.start()
        killed = False
        try:
            proc.wait(timeout=plan.limit)
        except subprocess.TimeoutExpired:
            killed = True
            self._kill_since(since)
            try:
                proc.wait(timeout=KILL_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        duration = time.monotonic() - started
        out.join(KILL_GRACE_SECONDS)
        err.join(KILL_GRACE_SECONDS)
        stdout, stderr = out.text(), err.text()
        after = _daemon.limit_counters(self._groups)
        oom_hit, pids_hit = after[0] > before[0], after[1] > before[1]
        if pids_hit and not killed:
            self._kill_since(since)  # what it forked may still be forking
        self._raise_if_broken(proc.returncode, stderr)
        status = exec_status(
            plan.kind,
            killed=killed,
            past_deadline=self.past_deadline(),
            memory=oom_hit,
            pids=pids_hit,
        )
        return ExecResult(
            exit_code=None if killed else proc.returncode,
            stdout=stdout,
            stderr=stderr,
            timed_out=killed,
            duration=duration,
            status=status,
        )

    def _raise_if_broken(self, code: int, stderr: str) -> None:
        self._check_open()
        if code != 0 and (
            stderr.startswith(_DAEMON_ERRORS) or not _procfs.alive(self._init_pid, self._init_start)
        ):
            raise SandboxError(f"sandbox {self.id}: its container failed: {stderr.strip()}")

    # -- files -----------------------------------------------------------------------

    def _open_output(self) -> OutputRoot:
        self._check_open()
        assert self._output is not None
        return self._output

    def read_file(self, path: str, *, max_bytes: int = 64 * 1024**2) -> bytes:
        """Read a file under /output; no symlinks followed (see ``Sandbox.read_file``)."""
        with self._files_lock:
            return self._open_output().read(path, max_bytes)

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file under /output, parents created (see ``Sandbox.write_file``)."""
        with self._files_lock:
            self._open_output().write(path, bytes(data))

    def collect(self, dest: Path) -> list[Path]:
        """Stop every process, then copy the output folder's regular files within bounds.

        After ``collect`` the sandbox is only good for ``close``.
        """
        self._check_open()
        self.stop_processes()
        with self._files_lock:
            report = self._open_output().collect(Path(dest), self.limits.output_bytes)
        self.collect_report = report.to_dict()
        return report.copied

    def info(self) -> dict[str, object]:
        """Backend facts for the attempt record: the container, its limits and timings."""
        self._check_open()
        return {
            "backend": "docker",
            "id": self.id,
            "container": self.id,
            "image": self.image,
            "enforcement": "docker",
            "enforced_by": self._backend.enforced_by(),
            "runtime": dict(self.runtime),
            "uid": self._backend.uid,
            "network": "none + relay socket" if self._relay else "none",
            "init_pid": self._init_pid,
            "pid_namespace": self._namespace,
            "cgroups": sorted({str(p) for p in self._groups.values()}),
            "cpus": self.cpus,
            "limits": dataclasses.asdict(self.limits),
            "labels": dict(self.labels),
            "timings": dict(self._timings),
            "execs": self.execs,
            "seconds_left": self.seconds_left(),
        }


__all__ = ["CONTROLLER_LABEL", "LABEL", "LABEL_PREFIX", "DockerSandbox"]
