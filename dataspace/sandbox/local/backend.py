"""The ``local`` sandbox backend: namespaces, a private root and cgroups on this host.

Design
------
**Create.** A sandbox is one small init (``_init.py``, run by ``python -S -I`` with the
standard library and ``ctypes`` only). It is forked by a spawner thread that lives as long
as the controller, because ``PR_SET_PDEATHSIG``, which the init sets, fires when the
*thread* that forked it ends. The init unshares the mount, network, PID, IPC and UTS
namespaces and forks PID 1 of the new PID namespace, which dies with its parent in turn.
PID 1 mounts a tmpfs as the new root and fills it: read-only bind mounts of ``/usr``, of
the workbench's own minimal ``/etc`` (``_etc.py``: no host users, name or package sources),
the ``/bin``-style links, the Data Workbench Runtime (``workbench.py``: its Python
at ``/usr/local``, where the official image has it, and ``/opt/dataspace`` with ``TOOLS.md``
and the native harnesses), the workspace read-only at ``/workspace`` (as a read-only overlay
built from detached mounts, so ``/proc/self/mountinfo`` shows no host path); size-limited
tmpfs mounts at ``/output`` and ``/tmp``; a ``/proc`` of the new PID namespace and a
``/dev`` with only null, zero, random and urandom. Nothing of the controller's Python or
virtual environment is there. It pivots into that root and from then on only reaps orphans
and, at the sandbox deadline (``Limits.wall_seconds`` from the moment it is ready, as for a
pod), kills every other process of its namespace. Every sandbox has a user namespace of its
own (and so its own user keyrings): as root, PID 1 unshares it last, owning nothing, and the
init's first process maps the sandbox uid 65534 to the host's 65534; unprivileged, it is
unshared first with the other namespaces and maps 65534 to the controller's own ids. The new
network namespace has no interface up, so there is no route anywhere, not even to the host's
loopback. Staging a workspace is one mount, nothing is copied, and every mount lives and
dies with the sandbox's mount namespace: the host's mount table never changes. Creating
takes one Python start-up (~10 ms).

**Exec.** Each command is a chain of small util-linux programs, no Python. The controller
starts it from spawner threads that run under the seccomp filter (``_seccomp.py``: the usual
container deny list, keyring, ``bpf``, ``ptrace``, mounts, modules, new namespaces …), which
every process of the command inherits and none can remove: ``/bin/sh`` writes its pid into
the sandbox's cgroups and execs ``nsenter``, which joins the namespaces (the user namespace
last, taking uid/gid 65534 with no supplementary groups) and the root and forks into the PID
namespace; ``no_new_privs`` comes with the filter from the spawner thread (without a
filter, ``setpriv`` sets it), and ``execve`` as a uid other than the namespace's root
leaves no capabilities. The command gets a clean environment: the official
workbench's ``PATH`` and variables (``workbench.ENVIRONMENT``), ``HOME=/tmp``,
``LANG=C.UTF-8``, ``TMPDIR=/tmp`` and the spec's variables, never the controller's. Output
is read with a size cap while a pidfd watches the command.

**Limits.** Where a cgroup hierarchy is writable (v2 when its unified hierarchy has the
memory, pids and cpu controllers, else v1) the sandbox gets one group, inside the
controller's own group of each hierarchy, with the memory,
pids and cfs cpu limits, and each command a child group that tracks everything it starts.
At a timeout everything in that group dies, daemons included, except the command's
``nsenter``, which reaps the rest and exits by itself (killed first, it would leave the
command's remains to the host's init). OOM kills are read from the groups' event
counters and reported as ``resource_limit``, and so is a timeout while the pids limit was
hit; a command that ends by itself after a fork failed (``EAGAIN``) keeps its exit code
and status ``ok``, but its group is killed (what it forked may still be forking).
Without cgroups, ``prlimit`` applies ``RLIMIT_AS``, ``RLIMIT_NPROC`` and ``RLIMIT_CPU``
to each command, and a timeout kills the processes of the sandbox that are in the
command's session or were started since it began outside the session of another running
command.

**Files.** The controller opens ``/proc/<pid 1>/root/output`` once and reaches every file
from that descriptor, one component at a time with ``O_NOFOLLOW`` (see ``_paths.py``), so
no symbolic link is followed and no pid is looked up again. ``collect`` first stops every
process of the sandbox, then copies within bounds of bytes, files and folder entries and
reports what it skipped (``collect_report``).

**Close and crashes.** ``close`` kills PID 1 (the kernel then kills its whole PID
namespace and frees its mounts), removes the cgroups and the state folder. Each sandbox
records its controller (pid and start time) in ``<state dir>/<id>/owner.json`` and in the
name of its cgroup; if the controller dies, the death signals end the init pair and with
it everything inside, and ``LocalBackend.sweep`` (run whenever a backend is created)
removes the cgroups and folders left behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import secrets
import select
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from dataspace.checks import timed
from dataspace.errors import ConfigError, SandboxClosedError, SandboxError
from dataspace.limits import Limits, format_size
from dataspace.sandbox import _procfs, rootfs, workbench
from dataspace.sandbox._paths import OutputRoot
from dataspace.sandbox.base import (
    OUTPUT_DIR,
    RELAY_DIR,
    TMP_DIR,
    WORKSPACE_DIR,
    Check,
    ExecPlan,
    ExecResult,
    PreflightRequest,
    RuntimeChange,
    Sandbox,
    SandboxBackend,
    SandboxSpec,
    check_env,
    exec_status,
)
from dataspace.sandbox.local import _cgroup, _etc, _procs, _seccomp

logger = logging.getLogger(__name__)

Enforcement = Literal["auto", "cgroup", "cgroup-v1", "cgroup-v2", "rlimit"]

SANDBOX_UID = 65534
CAPTURE_BYTES = 8 * 1024**2
"""Stdout and stderr each keep at most this much of a command's output."""
PIPE_GRACE_SECONDS = 0.5
"""How long output is still read after a command exits while something it left holds the pipe."""
INIT_TIMEOUT_SECONDS = 30.0
KILL_GRACE_SECONDS = 2.0
"""How long a killed command's ``nsenter`` may take to exit before it is killed too."""
_JOIN_FAILED = "dataspace-sandbox: cannot join the sandbox cgroup"
_JOIN_SCRIPT = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do '
    f'echo $$ > "$1" || {{ echo "{_JOIN_FAILED}" >&2; exit 125; }}; shift; n=$((n - 1)); '
    'done; exec "$@"'
)
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_TOOL_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin")
_SPAWNER = _procs.Spawner()


def _tool(name: str) -> str:
    for folder in _TOOL_DIRS:
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    raise SandboxError(f"local sandbox backend: {name} not found in {', '.join(_TOOL_DIRS)}; "
                       "install util-linux")  # fmt: skip


def _userns_blocker() -> str | None:
    """Why this host refuses unprivileged user namespaces, or ``None`` if it seems to allow them."""
    for path, bad in (("/proc/sys/user/max_user_namespaces", "0"),
                      ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
                      ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1")):  # fmt: skip
        with contextlib.suppress(OSError):
            if Path(path).read_text().strip() == bad:
                return f"{path} is {bad}"
    return None


def machine_memory_bytes() -> int:
    """This host's physical memory in bytes (0 when the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


class LocalBackend(SandboxBackend):
    """Creates sandboxes on this host (see the module docstring for the design).

    Args:
        state_dir: where per-sandbox state folders live (default: a root-only folder in
            the system temp folder).
        enforcement: ``auto`` (cgroups when writable, rlimits otherwise), ``cgroup``,
            ``cgroup-v1``, ``cgroup-v2`` (fail when not available) or ``rlimit``.
        uid: the uid and gid commands run as inside the sandbox. When the controller is
            not root, each sandbox also gets a user namespace that maps this id to the
            controller's own uid and gid (the only mapping an unprivileged user may make).
        sweep: remove leftovers of dead controllers now.

    Raises:
        SandboxError: the host can run no sandbox (neither root nor unprivileged user
            namespaces, util-linux missing, or the required cgroups are not writable).
    """

    name = "local"
    relay_transport = "socket"
    harnesses_from_host = True

    def __init__(
        self,
        *,
        state_dir: str | Path | None = None,
        enforcement: Enforcement = "auto",
        uid: int = SANDBOX_UID,
        sweep: bool = True,
        runtime_root: str | Path = workbench.RUNTIME_ROOT,
        seccomp: bool = True,
    ) -> None:
        root = os.geteuid() == 0
        self.user_namespace = True
        # Unprivileged, the sandbox's user namespace owns all its namespaces and maps only
        # the sandbox uid; as root, the root is built first and the namespace comes last.
        self.userns_owns_all = not root
        if not root:
            blocker = _userns_blocker()
            if blocker:
                raise SandboxError(
                    "local sandbox backend: needs root or unprivileged user namespaces, and "
                    f"this host allows neither ({blocker}); run the controller as root or "
                    "enable unprivileged user namespaces"
                )
        self.uid = uid
        self.host_ids = (uid, uid) if root else (os.geteuid(), os.getegid())
        default_state = Path(tempfile.gettempdir()) / f"dataspace-sandbox-{os.geteuid()}"
        self.state_dir = Path(state_dir) if state_dir is not None else default_state
        self._prepare_state_dir()
        self.layout = self._pick_layout(enforcement)
        self.enforcement = self.layout.enforcement if self.layout else "rlimit"
        self.tools = {name: _tool(name) for name in ("nsenter", "setpriv", "prlimit")}
        self.runtime_root = Path(runtime_root)
        self.runtime = workbench.read_manifest(self.runtime_root)
        self.system_root = str(rootfs.debian_root(self.runtime_root))
        self.system_ops = _system_ops(self.runtime_root, self.system_root)
        self.seccomp: _seccomp.Filter | None = None
        self._spawner: _procs.Spawner | None = None
        if seccomp:
            try:
                self.seccomp, self._spawner = _seccomp.shared()
                self._spawner.start()
            except OSError as exc:
                raise SandboxError(
                    f"local sandbox backend: no seccomp filter on this host ({exc}); pass "
                    "seccomp=False in the backend options to run without one"
                ) from exc
        if sweep:
            self.sweep()

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """Start a command's chain: under the seccomp filter when the backend has one."""
        if self._spawner is not None:
            return self._spawner.popen(argv, **kwargs)
        return subprocess.Popen(argv, **kwargs)

    def _prepare_state_dir(self) -> None:
        try:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = self.state_dir.lstat()
        except OSError as exc:
            raise SandboxError(f"local sandbox state folder {self.state_dir}: {exc}") from exc
        if self.state_dir.is_symlink() or info.st_uid != os.geteuid():
            raise SandboxError(
                f"local sandbox state folder {self.state_dir}: not a folder owned by uid "
                f"{os.geteuid()}; remove it or pass another state_dir"
            )

    def _pick_layout(self, enforcement: str) -> _cgroup.CgroupLayout | None:
        if enforcement == "rlimit":
            return None
        prefer = {"cgroup-v1": "v1", "cgroup-v2": "v2"}.get(enforcement, "auto")
        layout = _cgroup.detect(prefer)
        if layout is None and enforcement != "auto":
            raise SandboxError(
                f"local sandbox backend: enforcement {enforcement!r} asked for, but no "
                "writable cgroup hierarchy has the memory and pids controllers"
            )
        return layout

    def enforced_by(self) -> dict[str, str]:
        """How each limit is enforced by this backend on this host."""
        if self.layout is not None:
            cpu = "cfs quota" if "cpu" in self.layout.parents else "not enforced"
            memory, pids = "cgroup memory limit (OOM kill)", "cgroup pids limit"
        else:
            cpu = "RLIMIT_CPU (cpu seconds per process)"
            memory, pids = "RLIMIT_AS", "RLIMIT_NPROC (per uid, shared by sandboxes)"
        return {
            "memory_bytes": memory,
            "pids": pids,
            "cpus": cpu,
            "wall_seconds": "PID 1 kills everything at the deadline",
            "command_timeout": "controller kills what the command started",
            "output_bytes": "tmpfs size and collect budget",
            "tmp_bytes": "tmpfs size",
        }

    def create(self, spec: SandboxSpec) -> LocalSandbox:
        """Create and start one sandbox with ``spec.workspace`` bound at /workspace."""
        return LocalSandbox(self, spec)

    def check_limits(self, limits: Limits) -> str:
        """Refuse limits this host cannot give (memory above the machine's own).

        Raises:
            ConfigError: naming the spec key (``sandbox.memory``) and the largest value.
        """
        total = machine_memory_bytes()
        if total and limits.memory_bytes > total:
            raise ConfigError(
                f"sandbox.memory: {format_size(limits.memory_bytes)} is more than this "
                f"machine's memory ({format_size(total)}); set sandbox.memory to at most "
                f"{total // 1024**3}g"
            )
        return f"memory {limits.memory_bytes // 1024**2} MiB of this machine's {total // 1024**2}"

    def preflight(self, request: PreflightRequest) -> list[Check]:
        """The backend is ready and this host can give the run's limits (its memory).

        A ``sandbox.image`` is a warning: this backend shows the host's workbench.
        """

        def ready() -> str | tuple[str, bool]:
            self.check_limits(request.limits)
            if request.image:
                return (f"local backend ready (it does not use sandbox.image {request.image!r})",
                        True)  # fmt: skip
            return "local backend ready"

        return [timed("sandbox", ready)]

    @classmethod
    def host_checks(cls, options: Mapping[str, Any]) -> list[Check]:
        """The workbench this backend shows its sandboxes: its manifest and its tools."""
        from dataspace.sandbox.local.checks import check_workbench

        root = str(options.get("runtime_root") or workbench.RUNTIME_ROOT)
        return [timed("sandbox.workbench", functools.partial(check_workbench, root))]

    @classmethod
    def runtime_identity(cls, options: Mapping[str, Any], image: str | None) -> dict[str, Any]:
        """The manifest identity of the workbench at ``runtime_root`` (the image is unused).

        Raises:
            SandboxError: no workbench there (the message says how to install it).
        """
        root = options.get("runtime_root", workbench.RUNTIME_ROOT)
        return {
            "backend": cls.name,
            **workbench.manifest_identity(workbench.read_manifest(str(root))),
        }

    @classmethod
    def runtime_change(cls, options: Mapping[str, Any], run_id: str) -> RuntimeChange:
        """The workbench on this host is not the one the run recorded."""
        root = options.get("runtime_root") or workbench.RUNTIME_ROOT
        return RuntimeChange(
            what=f"the workbench at {root} is not the one run {run_id!r} was made with",
            fix="reinstall the workbench it recorded, or give the run a new run_id",
        )

    def sweep(self, labels: dict[str, str] | None = None) -> int:
        """Remove sandboxes whose controller process is gone; return how many.

        Kills their processes and removes their cgroups and state folders. With
        ``labels``, only sandboxes whose labels include all of them are removed.
        """
        removed: set[str] = set()
        try:
            entries = list(self.state_dir.iterdir())
        except FileNotFoundError:
            entries = []
        for entry in entries:
            record = _read_record(entry)
            if record is None:
                # Being created right now, or a crash before the record was written.
                with contextlib.suppress(OSError):
                    if not labels and time.time() - entry.stat().st_mtime > 60:
                        self._remove_leftover(entry, {})
                        removed.add(entry.name)
                continue
            if labels and any(record.get("labels", {}).get(k) != v for k, v in labels.items()):
                continue
            if _procfs.alive(record.get("controller_pid"), record.get("controller_start")):
                continue
            self._remove_leftover(entry, record)
            removed.add(entry.name)
        layout = self.layout
        for name in layout.group_names() if layout is not None else ():
            owner = _cgroup.parse_group_name(name)
            if layout is None or owner is None or _procfs.alive(owner[1], owner[2]):
                continue
            if labels and owner[0] not in removed:
                continue
            logger.info("sweep: removing cgroup %s of a dead controller", name)
            _cgroup.remove_group(layout, name)
            removed.add(owner[0])
        return len(removed)

    def _remove_leftover(self, entry: Path, record: dict) -> None:
        sandbox_id = entry.name
        logger.info("sweep: removing leftover sandbox %s", sandbox_id)
        _procs.kill(record.get("pid1"), record.get("pid1_start"))
        _procs.kill(record.get("init_pid"), record.get("init_start"))
        for pid in _procs.find_by_cmdline(f"id={sandbox_id}".encode()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.layout is not None and record.get("cgroup"):
            _cgroup.remove_group(self.layout, str(record["cgroup"]))
        shutil.rmtree(entry, ignore_errors=True)


def _system_ops(runtime_root: Path, system: str = "/") -> list[tuple[str, ...]]:
    """The filesystem operations that give a sandbox the Debian root and the workbench.

    The Debian 12 root's ``/usr`` (``rootfs.py``: Debian's tools, the workbench's
    command-line tools among them), not the host's,
    the workbench Python at ``/usr/local`` (where the official image has its Python,
    hiding the host's own ``/usr/local``) and, at ``/opt/dataspace``, the files the
    official workbench image has there (``TOOLS.md``, ``capabilities.json``, the two package
    lists) and the runtime manifest: not the rest of the host's runtime root (its Python
    builds, the harness installs, which an attempt gets bound at ``/opt/harness/<name>``
    only when its harness needs one). Nothing of the controller's Python or virtual
    environment; the sandbox's ``/etc`` is its own (``_etc.py``).
    """
    ops: list[tuple[str, ...]] = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = os.path.join(system, name)
        if os.path.islink(path):
            ops.append(("link", os.readlink(path), "/" + name))
        elif os.path.isdir(path):
            ops.append(("bind", path, "/" + name))
    ops.append(("bind", os.path.join(system, "usr"), "/usr"))
    root = os.path.realpath(runtime_root)
    # Resolved once: a rebuild swaps the link to a new folder, this sandbox keeps its own.
    ops.append(("bind", os.path.realpath(os.path.join(root, workbench.PYTHON_DIR)), "/usr/local"))
    for name in workbench.VISIBLE_FILES:
        if os.path.isfile(os.path.join(root, name)):
            ops.append(("bind", os.path.join(root, name), f"{workbench.RUNTIME_ROOT}/{name}"))
    return ops


def _read_record(entry: Path) -> dict | None:
    try:
        return json.loads((entry / "owner.json").read_text())
    except (OSError, ValueError):
        return None


class _Capture:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.data = bytearray()
        self.limit = limit
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def text(self) -> str:
        text = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[{self.dropped} more bytes not kept]"
        return text


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Finished:
    returncode: int
    stdout: str
    stderr: str
    killed: bool
    duration: float


class LocalSandbox(Sandbox):
    """One live local sandbox; create it with :meth:`LocalBackend.create`.

    Raises:
        SandboxError: the sandbox could not be created (the message says why).
    """

    def __init__(self, backend: LocalBackend, spec: SandboxSpec) -> None:
        started = time.monotonic()
        super().__init__(sandbox_id=f"lsb-{secrets.token_hex(6)}", limits=spec.limits)
        self._backend = backend
        self.labels = dict(spec.labels)
        self._relay_dir = spec.relay_dir
        self._runtime_binds = tuple(spec.runtime_binds)
        workspace = Path(spec.workspace).resolve()
        if not workspace.is_dir():
            raise SandboxError(f"sandbox workspace {spec.workspace}: not a folder")
        check_env(spec.env, f"sandbox {self.id} spec env")
        if not backend.userns_owns_all and workspace.stat().st_mode & 0o005 != 0o005:
            logger.warning(
                "sandbox %s: workspace %s is not readable by others; commands run as uid %d "
                "will not be able to list it",
                self.id,
                workspace,
                backend.uid,
            )
        self._base_env = {
            "PATH": _SYSTEM_PATH,
            "HOME": TMP_DIR,
            "LANG": "C.UTF-8",
            "TMPDIR": TMP_DIR,
            **workbench.ENVIRONMENT,
            **spec.env,
        }
        self._files_lock = threading.Lock()
        self._running: dict[int, int] = {}  # command number -> session (rlimit mode)
        self._deadline = started + self.limits.wall_seconds  # until PID 1 says its own
        self._dir = backend.state_dir / self.id
        self._cgroup: _cgroup.SandboxCgroup | None = None
        self._init: subprocess.Popen[bytes] | None = None
        self._pid1: int | None = None
        self._pid1_start: int | None = None
        self._output_fd: int | None = None
        self._pid_namespace: int | None = None
        self._output: OutputRoot | None = None
        self.host_path_hidden = False
        self._record: dict[str, Any] = {
            "id": self.id,
            "controller_pid": os.getpid(),
            "controller_start": _procfs.start_time(os.getpid()),
            "labels": self.labels,
            "created_at": time.time(),
        }
        if backend.layout is not None:
            owner = (os.getpid(), self._record["controller_start"])
            self._record["cgroup"] = _cgroup.group_name(self.id, *owner)
        try:
            (self._dir / "root").mkdir(parents=True)
            self._write_record()
            if backend.layout is not None:
                name = self._record["cgroup"]
                self._cgroup = _cgroup.SandboxCgroup(backend.layout, name, self.limits)
            self._timings = self._start_init(workspace)
        except BaseException:
            self._teardown()
            raise
        assert self._output_fd is not None
        self._pid_namespace = _procfs.pid_namespace(self._pid1) if self._pid1 else None
        self._output = OutputRoot(
            fd=self._output_fd, owner=backend.host_ids if os.geteuid() == 0 else None
        )
        self._timings["create_seconds"] = time.monotonic() - started
        logger.debug("sandbox %s created in %.3fs", self.id, self._timings["create_seconds"])

    # -- creation and teardown -------------------------------------------------------

    def _write_record(self) -> None:
        temp = self._dir / "owner.json.tmp"
        temp.write_text(json.dumps(self._record))
        temp.replace(self._dir / "owner.json")

    def _init_argv(self, workspace: Path) -> list[str]:
        backend, limits, uid = self._backend, self.limits, self._backend.uid
        mapping = f"{uid}:{backend.host_ids[0]}:{backend.host_ids[1]}"
        userns, late_userns = (mapping, "-") if backend.userns_owns_all else ("-", mapping)
        script = str(Path(__file__).with_name("_init.py"))
        argv = [
            sys.executable or "/usr/bin/python3", "-S", "-I", script,
            f"id={self.id}", f"ppid={os.getpid()}", f"wall={limits.wall_seconds:.6f}",
            f"root={self._dir / 'root'}", f"userns={userns}", f"late_userns={late_userns}",
            f"hostname={_etc.HOSTNAME}",
        ]  # fmt: skip
        # /tmp first: the host's Python or venv may live under /tmp (a CI clone, say), and
        # a later tmpfs on /tmp would hide its bind mount.
        argv += ["tmpfs", TMP_DIR, f"size={limits.tmp_bytes},mode=1777"]
        for op in backend.system_ops:
            argv.extend(op)
        try:
            etc = _etc.ops(self._dir / "etc", os.path.join(backend.system_root, "etc"))
        except OSError as exc:
            raise SandboxError(f"sandbox {self.id}: cannot write its /etc: {exc}") from exc
        for op in etc:
            argv.extend(op)
        argv += ["hidden", str(workspace), WORKSPACE_DIR]
        for host, inside in self._runtime_binds:
            if not os.path.isdir(host) or not inside.startswith("/opt/"):
                raise SandboxError(
                    f"sandbox {self.id}: runtime bind {host} -> {inside}: "
                    "needs an existing host folder and a path under /opt"
                )
            argv += ["bind", host, inside]
        if self._relay_dir is not None:
            argv += ["bind", str(Path(self._relay_dir).resolve()), RELAY_DIR, "loopback"]
        argv += ["tmpfs", OUTPUT_DIR, f"size={limits.output_bytes},mode=0755,uid={uid},gid={uid}"]
        argv += ["dev", "proc"]
        return argv

    def _start_init(self, workspace: Path) -> dict[str, float]:
        self._init = _SPAWNER.popen(
            self._init_argv(workspace),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        assert self._init.stdout is not None
        self._record.update(init_pid=self._init.pid, init_start=_procfs.start_time(self._init.pid))
        lines = _read_all(self._init.stdout, INIT_TIMEOUT_SECONDS).splitlines()
        self._init.stdout.close()
        words = {line.split(" ", 1)[0]: line.split(" ", 1)[1:] for line in lines if line}
        if "pid" in words:
            self._pid1 = int(words["pid"][0])
            self._pid1_start = _procfs.start_time(self._pid1)
            self._record.update(pid1=self._pid1, pid1_start=self._pid1_start)
            self._write_record()
        if "ready" not in words or self._pid1 is None:
            problem = words.get("error", [" | ".join(lines) or "no answer"])[0]
            hint = ""
            if self._backend.userns_owns_all and "unshare" in problem:
                hint = "; this host may not allow unprivileged user namespaces (run as root)"
            raise SandboxError(f"sandbox {self.id}: cannot start: {problem}{hint}")
        ready = words["ready"][0].split()
        setup, bind = float(ready[0]), float(ready[1])
        self.host_path_hidden = len(ready) > 2 and ready[2] == "1"
        self._deadline = float(ready[3])  # the wall clock starts once the sandbox is ready
        # Held until close: file calls never go through a pid that could be reused.
        flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        self._output_fd = os.open(f"/proc/{self._pid1}/root{OUTPUT_DIR}", flags)
        return {"init_seconds": setup, "workspace_bind_seconds": bind}

    def _teardown(self) -> None:
        with self._files_lock:  # a file call in flight still uses the descriptor
            if self._output_fd is not None:
                os.close(self._output_fd)  # it would keep the output tmpfs alive
                self._output_fd = None
        # Killing PID 1 makes the kernel kill the rest of its PID namespace.
        if self._pid1 is not None:
            _procs.kill(self._pid1, self._pid1_start)
        elif self._init is not None:
            self._init.kill()
        if self._init is not None:
            if not _wait_exit(self._init, 10.0):
                self._init.kill()
            self._init.wait()
        if self._cgroup is not None:
            try:
                self._cgroup.remove()
            except OSError as exc:  # left for a later sweep; the rest must still go
                logger.warning("sandbox %s: cannot remove its cgroup: %s", self.id, exc)
        shutil.rmtree(self._dir, ignore_errors=True)

    def close(self) -> None:
        """Kill everything the sandbox runs and remove its cgroups and folders; idempotent."""
        if not self._mark_closed():
            return
        self._teardown()
        logger.debug("sandbox %s closed", self.id)

    def _open_output(self) -> OutputRoot:
        self._check_open()
        assert self._output is not None
        return self._output

    # -- commands --------------------------------------------------------------------

    def _exec(self, plan: ExecPlan) -> ExecResult:
        """Run a validated command as the sandbox user, within ``plan.limit`` seconds.

        Raises:
            SandboxError: the sandbox itself failed (its init is gone, cgroups vanished).
        """
        number, argv, cwd, env, limit, kind = (
            plan.number,
            plan.argv,
            plan.cwd,
            plan.env,
            plan.limit,
            plan.kind,
        )
        try:
            chain = self._chain(number, cwd) + argv
        except OSError as exc:  # the cgroup went away: closed meanwhile, or removed
            self._check_open()
            raise SandboxError(f"sandbox {self.id}: cannot track a command: {exc}") from exc
        cgroup = self._cgroup
        before = cgroup.counters(number) if cgroup is not None else (0, 0)
        oom_hit = pids_hit = False
        try:
            done = self._run(chain, {**self._base_env, **env}, limit, number)
            if cgroup is not None:
                after = cgroup.counters(number)
                oom_hit, pids_hit = after[0] > before[0], after[1] > before[1]
                if pids_hit and not done.killed:
                    # It ended by itself, but what it forked may still be forking: a
                    # finished command that hit the pids limit loses its whole group.
                    cgroup.kill_exec(number)
            else:  # only RLIMIT_CPU announces itself, by SIGXCPU
                oom_hit = done.returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU)
        finally:
            if cgroup is not None:
                cgroup.release_exec(number)
        self._raise_if_broken(done)
        # PID 1 kills everything at the deadline, maybe a moment before we would.
        past_deadline = self.past_deadline()
        killed = done.killed or (past_deadline and done.returncode in (-9, 128 + 9))
        status = exec_status(
            kind, killed=killed, past_deadline=past_deadline, memory=oom_hit, pids=pids_hit
        )
        code = None if killed else done.returncode
        return ExecResult(
            exit_code=code if code is None or code >= 0 else 128 - code,
            stdout=done.stdout,
            stderr=done.stderr,
            timed_out=killed,
            duration=done.duration,
            status=status,
        )

    def _chain(self, number: int, cwd: str) -> list[str]:
        backend, limits, uid = self._backend, self.limits, self._backend.uid
        tools = backend.tools
        chain: list[str] = []
        if self._cgroup is not None:
            files = self._cgroup.join_files(number)
            chain = ["/bin/sh", "-c", _JOIN_SCRIPT, "sh", str(len(files)), *files]
        chain += [tools["nsenter"], "-t", str(self._pid1), "-m", "-n", "-p", "-i", "-u"]
        if backend.userns_owns_all:  # our ids are already the sandbox's there
            chain += ["-U", "--preserve-credentials"]
        else:  # nsenter takes the sandbox uid itself, while it holds the namespace's caps
            chain += ["-U", f"--setuid={uid}", f"--setgid={uid}"]
        chain += ["-r", f"--wdns={cwd}", "--"]
        if self._cgroup is None:
            cpu_seconds = max(1, int(limits.wall_seconds * limits.cpus))
            chain += [tools["prlimit"], f"--as={limits.memory_bytes}", f"--nproc={limits.pids}",
                      f"--cpu={cpu_seconds}:{cpu_seconds + 5}", "--core=0", "--"]  # fmt: skip
        # Exec as a uid other than the namespace's root leaves no capability; no_new_privs
        # keeps it so (no file capabilities, no setuid). The spawner thread set it with the
        # seccomp filter and every process inherits both; without a filter setpriv sets it.
        if backend.seccomp is None:
            chain += [tools["setpriv"], "--nnp", "--"]
        return chain

    def _run(self, argv: list[str], env: dict[str, str], limit: float, number: int) -> _Finished:
        started = time.monotonic()
        proc = self._backend.popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd="/",
            start_new_session=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        self._running[number] = proc.pid
        since = _procfs.start_time(proc.pid) or 0
        out, err = _Capture(CAPTURE_BYTES), _Capture(CAPTURE_BYTES)
        killed_at: float | None = None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ, out)
            selector.register(proc.stderr, selectors.EVENT_READ, err)
            pidfd = _pidfd(proc.pid)
            if pidfd is not None:
                selector.register(pidfd, selectors.EVENT_READ, None)
            exited_at: float | None = None
            try:
                while True:
                    now = time.monotonic()
                    if exited_at is None and proc.poll() is not None:
                        exited_at = now
                    if exited_at is not None:
                        streams = [k for k in selector.get_map().values() if k.data is not None]
                        wait = exited_at + PIPE_GRACE_SECONDS - now
                        if not streams or wait <= 0:
                            break
                    elif now >= started + limit:
                        # Again on every round: what is forked meanwhile dies too.
                        killed_at = killed_at or now
                        self._kill_command(proc, number, since)
                        if now - killed_at > KILL_GRACE_SECONDS:
                            proc.kill()
                        wait = 0.05
                    else:
                        wait = started + limit - now
                    if pidfd is None:
                        wait = min(wait, 0.05)
                    for key, _ in selector.select(timeout=wait):
                        if key.data is None:
                            selector.unregister(key.fileobj)
                            continue
                        chunk = os.read(key.fd, 65536)
                        if chunk:
                            key.data.add(chunk)
                        else:
                            selector.unregister(key.fileobj)
            finally:
                if pidfd is not None:
                    os.close(pidfd)
                proc.stdout.close()
                proc.stderr.close()
                if proc.poll() is None:
                    self._kill_command(proc, number, since)
                    proc.kill()
                proc.wait()
                self._running.pop(number, None)
        return _Finished(
            returncode=proc.returncode,
            stdout=out.text(),
            stderr=err.text(),
            killed=killed_at is not None,
            duration=time.monotonic() - started,
        )

    def _kill_command(self, proc: subprocess.Popen[bytes], number: int, since: int) -> None:
        """Kill everything command ``number`` started, but its ``nsenter`` (``proc``).

        With cgroups that is its group. Without, it is every process of the sandbox in
        its session, or started since the command (at ``since`` clock ticks) and not in
        the session of another running command; a daemon of a concurrent command that
        left its session may be taken too. ``nsenter`` then exits by itself.
        """
        if self._cgroup is not None:
            self._cgroup.kill_exec(number, spare=proc.pid)
            return
        others = {s for n, s in list(self._running.items()) if n != number}
        for pid, started, session in _procs.namespace_members(self._pid_namespace or 0):
            if pid != self._pid1 and (
                session == proc.pid or (started >= since and session not in others)
            ):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def _raise_if_broken(self, done: _Finished) -> None:
        if self._closed:
            raise SandboxClosedError(f"sandbox {self.id} was closed while a command ran")
        if done.returncode == 125 and _JOIN_FAILED in done.stderr:
            raise SandboxError(f"sandbox {self.id}: {done.stderr.strip()}")
        if done.returncode != 0 and not _procfs.alive(self._pid1, self._pid1_start):
            raise SandboxError(
                f"sandbox {self.id}: its init process is gone ({done.stderr.strip()})"
            )

    # -- files -----------------------------------------------------------------------

    def read_file(self, path: str, *, max_bytes: int = 64 * 1024**2) -> bytes:
        """Read a file under /output (absolute or relative to it); no symlinks followed.

        Raises:
            PermissionError: the path leaves /output, or a component is a symbolic link
                or not a regular file.
            FileNotFoundError: no such file.
            IsADirectoryError: the path names a folder.
            OSError: ``EFBIG`` when the file holds more than ``max_bytes``.
            SandboxClosedError: the sandbox is closed.
        """
        with self._files_lock:
            return self._open_output().read(path, max_bytes)

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file under /output (absolute or relative to it), parents created.

        Raises:
            PermissionError: the path leaves /output, or a component is a symbolic link.
            OSError: ``ENOSPC`` past the output size limit.
            SandboxClosedError: the sandbox is closed.
        """
        with self._files_lock:
            self._open_output().write(path, bytes(data))

    def collect(self, dest: Path) -> list[Path]:
        """Stop every process of the sandbox, then copy the output folder's regular files.

        Nothing runs while the files are copied (a background process cannot change them
        meanwhile), so after ``collect`` the sandbox is only good for ``close``. Files are
        taken in name order within ``output_bytes`` bytes and :data:`MAX_COLLECT_FILES`
        files (and :data:`MAX_COLLECT_ENTRIES` folder entries looked at); symbolic links,
        pipes, sockets and files past a bound are skipped. :attr:`collect_report` says what
        was copied and what was skipped, and why.
        """
        self._check_open()
        self.stop_processes()
        with self._files_lock:
            report = self._open_output().collect(Path(dest), self.limits.output_bytes)
        self.collect_report = report.to_dict()
        return report.copied

    def stop_processes(self) -> int:
        """Kill every process of the sandbox but its PID 1; return how many were killed.

        On return nothing of the sandbox runs: its groups are empty and no process of its
        PID namespace but PID 1 is alive (zombies may wait a moment for their reaper).
        """
        self._check_open()
        killed: set[int] = set()
        for attempt in range(200):  # the pids limit bounds what a fork loop makes meanwhile
            members = []
            if self._cgroup is not None:
                # Every process of a command joined the sandbox's group before entering it.
                self._cgroup.kill_all()
                members = self._cgroup.members()
            if not members:  # also what has left the groups but is not dead yet
                members = [
                    pid
                    for pid, _, _ in _procs.namespace_members(self._pid_namespace or 0)
                    if pid != self._pid1 and _procfs.running(pid)
                ]
            if not members:
                return len(killed)
            for pid in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.002 if attempt < 20 else 0.02)
        raise SandboxError(f"sandbox {self.id}: processes still running after repeated SIGKILL")

    def info(self) -> dict[str, object]:
        """Backend facts for the attempt record: enforcement, ids, limits and timings."""
        self._check_open()
        cgroups = [str(p) for p in self._cgroup.paths.values()] if self._cgroup else []
        return {
            "backend": "local",
            "id": self.id,
            "enforcement": self._backend.enforcement,
            "user_namespace": self._backend.user_namespace,
            "seccomp": (
                f"deny list, {self._backend.seccomp.size} instructions"
                if self._backend.seccomp is not None
                else "off"
            ),
            "workspace_host_path_hidden": self.host_path_hidden,
            "runtime": workbench.manifest_identity(self._backend.runtime),
            "uid": self._backend.uid,
            "network": "loopback + relay socket" if self._relay_dir else "none",
            "enforced_by": self._backend.enforced_by(),
            "init_pid": self._pid1,
            "pid_namespace": self._pid_namespace,
            "cgroups": sorted(set(cgroups)),
            "state_dir": str(self._dir),
            "limits": dataclasses.asdict(self.limits),
            "labels": dict(self.labels),
            "timings": dict(self._timings),
            "execs": self._execs,
            "seconds_left": self.seconds_left(),
        }


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``proc`` to exit (``Popen.wait`` polls in steps)."""
    pidfd = _pidfd(proc.pid)
    if pidfd is None:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        return bool(select.select([pidfd], [], [], timeout)[0]) or proc.poll() is not None
    finally:
        os.close(pidfd)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _read_all(stream: object, timeout: float) -> str:
    """Read ``stream`` to its end, or until ``timeout`` seconds pass."""
    chunks: list[bytes] = []
    end = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)  # type: ignore[arg-type]
        fd = stream.fileno()  # type: ignore[attr-defined]
        while (left := end - time.monotonic()) > 0:
            if not selector.select(timeout=left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


__all__ = ["Enforcement", "LocalBackend", "LocalSandbox", "machine_memory_bytes"]
