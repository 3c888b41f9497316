"""One attempt's container: the official baseline's ``docker run``, commands by ``docker exec``.

**Create.** ``docker run --detach --init`` with the official baseline's flags (network
``none``, read-only root, every capability dropped, ``no-new-privileges``, the pids, CPU
and memory limits, a size-limited tmpfs at ``/tmp``) and ours: a size-limited tmpfs at
``/output`` owned by the sandbox user (the official runner bind-mounts a host folder
with no bound), the workspace bound read-only at ``/workspace``, the relay folder
read-only at ``RELAY_DIR`` (``--network none`` keeps the loopback interface, so a
forwarder inside can listen on 127.0.0.1), a harness's install read-only under ``/opt``,
the environment of the official image and labels naming the controller for ``sweep``.
The container's PID 1 is Docker's init, which reaps orphans and runs ``sleep infinity``
(the keeper); both run as root without a capability, so the sandbox user cannot signal
them (a harness's ``kill -9 -1`` leaves the container up).

Everything after ``docker run`` goes through the daemon too: nothing is read from this
host's ``/proc``, so the controller needs no root and may run on another kernel than the
containers (Docker Desktop).

**Exec.** ``docker exec --user 65534:65534`` of the bash wrapper ``_daemon.RUN_WRAPPER``
with the command's folder and variables. At its limit the wrapper kills, from inside,
every process of the container started since the command began, a daemon the command
left behind included; it reports OOM kills and refused forks from the container's own
cgroup counters. Should the wrapper itself be gone at the limit (the command killed it)
the controller kills every process of the sandbox user.

**Files.** ``docker exec`` of the file helper (``_inside.py``) as the sandbox user: every
path walked from ``/output`` one component at a time, no link followed; ``collect``
first kills every process of the sandbox user (the init and the keeper are root's), so
nothing the agent left running can change what is collected, then streams a tar.

**Deadline.** A timer stops every process of the sandbox user at ``Limits.wall_seconds``
after the container is ready; later commands are refused by the base class.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import subprocess
import tarfile
import threading
import time
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from dataspace.errors import SandboxError
from dataspace.sandbox import workbench
from dataspace.sandbox._paths import (
    _EXAMPLES,
    MAX_COLLECT_ENTRIES,
    MAX_COLLECT_FILES,
    CollectReport,
    output_parts,
)
from dataspace.sandbox.base import (
    OUTPUT_DIR,
    RELAY_DIR,
    TMP_DIR,
    WORKSPACE_DIR,
    ExecPlan,
    ExecResult,
    ExecStatus,
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
HOST_LABEL = "org.dataspace.controller-host"
"""The host name of the controller that made the container."""
LABEL_PREFIX = "org.dataspace.label."
"""Prefix of the spec's labels (run, agent, task, attempt) on the container."""
CAPTURE_BYTES = 8 * 1024**2
"""Stdout and stderr each keep at most this much of a command's output."""
KILL_GRACE_SECONDS = 10.0
"""How long past its limit a command's client may take before the controller kills."""
KILL_SECONDS = 60.0
"""How long the controller tries to start its kill in a container whose pids are full."""
HOSTNAME = "sandbox"
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_DAEMON_ERRORS = (b"Error response from daemon:", b"Error: No such container")
_TAIL_BYTES = 4096


class _Capture(threading.Thread):
    """Reads a stream to its end, keeping the first ``CAPTURE_BYTES`` and the last few."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.data = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def run(self) -> None:
        fd = self.stream.fileno()
        while chunk := os.read(fd, 65536):
            room = CAPTURE_BYTES - len(self.data)
            self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - room)
            if self.dropped:
                self.tail = (self.tail + chunk)[-_TAIL_BYTES:]

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        return text + (f"\n[{self.dropped} more bytes not kept]" if self.dropped else "")


@dataclasses.dataclass(frozen=True)
class _Report:
    """What the command wrapper appended to stderr (see ``_daemon.RUN_WRAPPER``)."""

    timed_out: bool
    exit_code: int
    oom_hit: bool
    pids_hit: bool


def _take_report(capture: _Capture, token: str) -> _Report | None:
    """Remove the wrapper's report from a stderr capture; None when there is none."""
    marker = _daemon.TRAILER + token.encode() + b" "
    buffer = capture.tail if capture.dropped else capture.data
    at = buffer.rfind(marker)
    if at < 0:
        return None
    end = buffer.find(b"\n", at)
    fields = bytes(buffer[at + len(marker) : end if end >= 0 else len(buffer)]).split()
    del buffer[at : end + 1 if end >= 0 else len(buffer)]
    if capture.dropped:
        capture.dropped = max(0, capture.dropped - (end + 1 - at if end >= 0 else 0))
    try:
        timed, code, oom0, oom, refused0, refused = (int(f) for f in fields)
    except ValueError:
        return None
    return _Report(
        timed_out=timed == 1,
        exit_code=code,
        oom_hit=oom0 >= 0 and oom > oom0,
        pids_hit=refused0 >= 0 and refused > refused0,
    )


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
        self._timer: threading.Timer | None = None
        self._stops = 0
        workspace = Path(spec.workspace).resolve()
        if not workspace.is_dir():
            raise SandboxError(f"sandbox {spec.workspace}: the workspace is not a folder")
        self.cpus = backend.cpus_for(self.limits.cpus)
        try:
            image_id = self._run(spec, workspace)
            self.runtime = backend.runtime_of(image_id, self.id)
        except BaseException:
            self._remove()
            raise
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
            "--label", f"{CONTROLLER_LABEL}={backend.controller[0]}",
            "--label", f"{HOST_LABEL}={backend.controller[1]}",
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

    def _run(self, spec: SandboxSpec, workspace: Path) -> str:
        """Start the container; the id of its image."""
        backend = self._backend
        _daemon.call(backend.docker, *self._run_argv(spec, workspace)[1:])
        text = _daemon.call(
            backend.docker, "inspect", "--format", "[{{json .State}},{{json .Image}}]", self.id
        )
        state, image_id = json.loads(text)
        if not state.get("Running"):
            raise SandboxError(f"sandbox {self.id}: its container is not running ({state})")
        return str(image_id)

    def _remove(self) -> None:
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
        try:
            if not self.closed:
                self.stop_processes()
        except SandboxError as exc:
            if not self.closed:
                logger.warning("sandbox %s: at the deadline: %s", self.id, exc)

    def running(self) -> bool:
        """Whether the daemon says the container runs."""
        try:
            state = _daemon.call(
                self._backend.docker, "inspect", "--format", "{{.State.Running}}", self.id
            )
        except SandboxError:
            return False
        return state.strip() == "true"

    # -- commands --------------------------------------------------------------------

    def _exec_argv(self, *argv: str, cwd: str = OUTPUT_DIR, stdin: bool = False) -> list[str]:
        """The client's arguments after ``exec`` for ``argv`` as the sandbox user."""
        uid = self._backend.uid
        return [*(["--interactive"] if stdin else []), "--user", f"{uid}:{uid}",
                "--workdir", cwd, self.id, *argv]  # fmt: skip

    def stop_processes(self) -> None:
        """Kill every process of the sandbox user (the init and the keeper are root's).

        Raises:
            SandboxError: the daemon could not run the kill, or something survived it.
        """
        self._stops += 1  # a command's wrapper killed meanwhile was stopped, not broken
        done = _daemon.exec_bytes(
            self._backend.docker, *self._exec_argv("bash", "-c", _daemon.KILL_ALL, "dsx-kill"),
            timeout=KILL_SECONDS,
        )  # fmt: skip
        if done.returncode != 0:
            why = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
            raise SandboxError(f"sandbox {self.id}: cannot stop its processes: {why}")

    def _exec(self, plan: ExecPlan) -> ExecResult:
        token = secrets.token_hex(8)
        uid = self._backend.uid
        argv = [self._backend.docker, "exec", "--interactive", "--user", f"{uid}:{uid}",
                "--workdir", plan.cwd]  # fmt: skip
        for key, value in plan.env.items():
            argv += ["--env", f"{key}={value}"]
        argv += [self.id, "bash", "-c", _daemon.RUN_WRAPPER, "dsx-run", f"{plan.limit:.3f}",
                 token, *plan.argv]  # fmt: skip
        started = time.monotonic()
        stops = self._stops
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        # the wrapper's timer reads this pipe, which stays open and empty until the end
        out, err = _Capture(proc.stdout), _Capture(proc.stderr)
        out.start()
        err.start()
        stopped = False
        try:
            proc.wait(timeout=plan.limit + KILL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            # the wrapper is gone (the command killed it) or its streams are held open
            stopped = True
            try:
                self.stop_processes()
            except SandboxError as exc:
                logger.warning("%s", exc)
        finally:
            if stopped:
                try:
                    proc.wait(timeout=KILL_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            proc.stdin.close()  # type: ignore[union-attr]
        duration = time.monotonic() - started
        out.join(KILL_GRACE_SECONDS)
        err.join(KILL_GRACE_SECONDS)
        report = _take_report(err, token)
        self._check_open()
        stopped = stopped or (report is None and self._stops != stops)
        if report is None and not stopped:
            self._raise_if_broken(proc.returncode, bytes(err.data))
        elif stopped and not self.running():
            raise SandboxError(f"sandbox {self.id}: its container stopped")
        killed = stopped or (report is not None and report.timed_out)
        status: ExecStatus = exec_status(
            plan.kind,
            killed=killed,
            past_deadline=self.past_deadline(),
            memory=report is not None and report.oom_hit,
            pids=report is not None and report.pids_hit,
        )
        code = report.exit_code if report is not None else proc.returncode
        return ExecResult(
            exit_code=None if killed else code,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=killed,
            duration=duration,
            status=status,
        )

    def _raise_if_broken(self, code: int, stderr: bytes) -> None:
        """A command with no wrapper report: the daemon's failure is an error, not a result."""
        if stderr.startswith(_DAEMON_ERRORS) or (code != 0 and not self.running()):
            text = stderr.decode(errors="replace").strip()
            raise SandboxError(f"sandbox {self.id}: its container failed: {text}")

    # -- files -----------------------------------------------------------------------

    def _helper(self, op: str, args: dict[str, Any], data: bytes | None = None) -> bytes:
        """Run one file operation; its payload, or its failure as an ``OSError``."""
        argv = [*_daemon.helper_argv(), op, json.dumps(args)]
        done = _daemon.exec_bytes(self._backend.docker, *self._exec_argv(
            *argv, stdin=data is not None), stdin=data)  # fmt: skip
        self._check_open()
        head, _, payload = done.stdout.partition(b"\n")
        try:
            header = json.loads(head)
        except ValueError:
            why = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
            raise SandboxError(f"sandbox {self.id}: file {op} failed: {why}") from None
        if not header.get("ok"):
            shown = "/".join(args.get("parts", ()))
            raise OSError(int(header["errno"]), f"{shown}: {header.get('message')}")
        return payload

    def read_file(self, path: str, *, max_bytes: int = 64 * 1024**2) -> bytes:
        """Read a file under /output; no symlinks followed (see ``Sandbox.read_file``)."""
        self._check_open()
        parts = list(output_parts(path))
        return self._helper("read", {"parts": parts, "max_bytes": int(max_bytes)})

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file under /output, parents created (see ``Sandbox.write_file``)."""
        self._check_open()
        parts = list(output_parts(path))
        if not parts:
            raise IsADirectoryError(f"{path}: is the output folder")
        self._helper("write", {"parts": parts}, data=bytes(data))

    def collect(self, dest: Path) -> list[Path]:
        """Stop every process, then copy the output folder's regular files within bounds.

        After ``collect`` the sandbox is only good for ``close``.
        """
        self._check_open()
        self.stop_processes()
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        report = CollectReport(max_bytes=self.limits.output_bytes, max_files=MAX_COLLECT_FILES,
                               max_entries=MAX_COLLECT_ENTRIES)  # fmt: skip
        args = {"max_bytes": report.max_bytes, "max_files": report.max_files,
                "max_entries": report.max_entries, "examples": _EXAMPLES}  # fmt: skip
        argv = [self._backend.docker, "exec",
                *self._exec_argv(*_daemon.helper_argv(), "collect", json.dumps(args))]  # fmt: skip
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)  # fmt: skip
        err = _Capture(proc.stderr)
        err.start()
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    self._take(tar, member, dest, report)
        except tarfile.TarError as exc:
            proc.kill()
            proc.wait()
            err.join(KILL_GRACE_SECONDS)
            why = err.text().strip() or str(exc)
            raise SandboxError(f"sandbox {self.id}: cannot collect its output: {why}") from None
        finally:
            proc.stdout.close()  # type: ignore[union-attr]
        proc.wait()
        err.join(KILL_GRACE_SECONDS)
        self._check_open()
        try:
            summary = json.loads(err.text().strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise SandboxError(f"sandbox {self.id}: cannot collect its output: "
                               f"{err.text().strip()}") from None  # fmt: skip
        report.entries = int(summary["entries"])
        report.listing_cut = bool(summary["listing_cut"])
        report.skipped = {str(k): int(v) for k, v in summary["skipped"].items()}
        report.examples = [str(e) for e in summary["examples"]][:_EXAMPLES]
        if report.skipped:
            logger.warning("collect: %s", report.summary())
        self.collect_report = report.to_dict()
        return report.copied

    @staticmethod
    def _take(
        tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, report: CollectReport
    ) -> None:
        """Write one regular file of the helper's tar under ``dest`` (names checked again)."""
        parts = PurePosixPath(member.name).parts
        if (not member.isreg() or not parts or member.name.startswith("/")
                or any(p in ("", ".", "..") for p in parts)
                or report.bytes + member.size > report.max_bytes
                or len(report.copied) >= report.max_files):  # fmt: skip
            report.skip(member.name, "refused by the controller")
            return
        source = tar.extractfile(member)
        assert source is not None
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as sink:
            while chunk := source.read(1024 * 1024):
                sink.write(chunk)
        report.bytes += member.size
        report.copied.append(target)

    def info(self) -> dict[str, object]:
        """Backend facts for the attempt record: the container, its limits and timings."""
        self._check_open()
        return {
            "backend": "docker",
            "id": self.id,
            "container": self.id,
            "image": self.image,
            "daemon": self._backend.server,
            "enforcement": "docker",
            "enforced_by": self._backend.enforced_by(),
            "runtime": dict(self.runtime),
            "uid": self._backend.uid,
            "network": "none + relay socket" if self._relay else "none",
            "cpus": self.cpus,
            "limits": dataclasses.asdict(self.limits),
            "labels": dict(self.labels),
            "timings": dict(self._timings),
            "execs": self.execs,
            "seconds_left": self.seconds_left(),
        }


__all__ = ["CONTROLLER_LABEL", "HOST_LABEL", "LABEL", "LABEL_PREFIX", "DockerSandbox"]
