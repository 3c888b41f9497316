"""The sandbox contract: one interface, several backends, one shared contract test suite.

A sandbox is created for one attempt with a read-only workspace and a writable output
folder; the agent (or the harness acting for it) runs commands inside it. Inside, the
workspace is at ``/workspace``, the output folder at ``/output`` and scratch space at
``/tmp``. The sandbox has no network at all and sees no controller secrets.

Everything the layers above (``dataspace.runs``, ``ray_jobs``) need of a backend is
declared here, so they never ask which backend they have: no comparison with a backend's
name, no ``getattr``/``hasattr`` for an optional method. A capability one backend lacks
has a default on the base class.

Writing a backend
-----------------
A backend is a subpackage ``dataspace/sandbox/<name>/`` whose ``__init__`` exports a
:class:`SandboxBackend` subclass; it is registered by name in ``dataspace.sandbox``'s
registry as a lazy ``"module:Class"`` string (``"dataspace.sandbox.docker:DockerBackend"``),
so a run spec's ``sandbox.backend: <name>`` finds it and nothing else changes.

The backend class (:class:`SandboxBackend`):

* ``name``: the registry name (class attribute).
* ``__init__(**options)``: keyword options are the run spec's ``sandbox.options``; a bad
  one raises ``ConfigError`` (one line naming the option and the fix), a host that can
  never run the backend raises ``SandboxError``.
* ``create(spec)`` -> a started :class:`Sandbox` with its workspace staged (abstract).
* ``sweep(labels)`` -> how many leftover sandboxes matching the labels were removed
  (abstract; the controller and ``ray_jobs.sweep`` call it with ``{"run": run_id}``).
* ``describe()`` -> where the backend's sandboxes live, for messages. Default: its name.
* ``relay_transport``: how a native harness (one that calls its model itself) reaches
  the controller's relay: ``"socket"`` (the attempt passes ``SandboxSpec.relay_dir``, a
  host folder whose Unix socket is bound at :data:`RELAY_DIR`) or ``"network"`` (the
  attempt passes ``SandboxSpec.relay_network`` and the sandbox's ``info()["relay"]`` says
  where to listen and what to dial). Default ``"socket"``.
* ``harnesses_from_host``: native harness CLIs come from this host's install (bound in by
  ``SandboxSpec.runtime_binds``), so preflight checks that install; False when the
  backend's image carries them. Default False.
* ``preflight(request)`` -> the :class:`~dataspace.checks.Check` records of what a run
  will meet (a :class:`PreflightRequest` says what the run asks); the first is keyed
  ``sandbox`` (is the backend ready at all), others ``sandbox.<part>``. Never raises for
  a failed check. Default: one passing ``sandbox`` check.
* ``wait_ready(request, progress)`` -> waits, bounded, until the run's sandboxes can
  start without delay (e.g. every node that may run one holds the runtime image); the
  controller calls it once before fanning attempts out. It shows what it waits for as
  :class:`~dataspace.checks.Check` records keyed ``sandbox.<part>`` through ``progress``
  and raises ``SandboxError`` (one line: what is missing, the fix) when the wait runs out.
  Default: returns at once.
* ``host_checks(options)`` (classmethod) -> checks of this host for the backend without
  a run spec (``dataspace doctor``), made even when the backend cannot be created (that
  is what they explain). Default: none.
* ``runtime_identity(options, image)`` (classmethod) -> what the agent's filesystem is (a
  workbench manifest's identity, or the image reference), computed once per run without
  creating a backend; part of the run's fingerprint, so stable and JSON-able. Default:
  ``{"backend": name, "image": image or options["image"] or default_image}``.
* ``runtime_change(options, run_id)`` (classmethod) -> :class:`RuntimeChange`: the words
  of the refusal when a resumed run's recorded runtime differs. Default: the image's.
* ``default_image``: the image used when neither ``sandbox.image`` nor
  ``options["image"]`` names one (None for a backend without images).

A live sandbox (:class:`Sandbox`) implements ``_exec(plan)``, ``read_file``,
``write_file``, ``collect``, ``info`` and ``close``. The base's ``exec`` validates the
command, the timeout and the environment, answers ``deadline`` once the wall clock ran
out, and hands the backend an :class:`ExecPlan` with the seconds the command may take and
the status a kill at that limit means. Call ``Sandbox.__init__`` first and
:meth:`Sandbox.start_clock` once the sandbox is ready. Staging a workspace (a folder or a
store URI into a cache the controller writes, a tar to stream) is shared in
``dataspace.sandbox.staging``.

Every backend passes the contract suite (``tests/sandbox/contract.py``, run over every
registered backend available on the machine).
"""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, NamedTuple

from dataspace.checks import Check
from dataspace.errors import ConfigError, SandboxClosedError
from dataspace.limits import Limits

WORKSPACE_DIR = "/workspace"
OUTPUT_DIR = "/output"
TMP_DIR = "/tmp"
RELAY_DIR = "/run/dataspace-relay"
"""Where ``SandboxSpec.relay_dir`` appears inside the sandbox."""

ExecStatus = Literal["ok", "timeout", "resource_limit", "deadline"]
RelayTransport = Literal["socket", "network"]
"""How a native harness reaches its relay: a Unix socket bound in, or a network route."""


@dataclass(frozen=True, kw_only=True)
class SandboxSpec:
    """What a backend needs to create one sandbox.

    Attributes:
        workspace: local folder staged read-only at /workspace (local backend), or the
            store URI of the workspace (cluster backends).
        limits: resource limits (``dataspace.limits.Limits``; its ``wall_seconds`` is the
            sandbox's deadline and ``command_timeout`` caps each ``exec``).
        labels: run, agent, task and attempt labels (used for sweeping leftovers).
        image: container image (ignored by the local backend).
        env: extra environment variables for commands (never secrets).
        relay_dir: optional host folder that will hold a relay's Unix socket: it is bound
            read-only at ``RELAY_DIR`` and the loopback interface of the sandbox's own
            network namespace is brought up, so a forwarder inside can listen on
            127.0.0.1 (the sandbox still has no route to any other host, the host's
            loopback included). Used by the native harnesses; off by default.
        runtime_binds: optional ``(host path, sandbox path)`` pairs bound read-only
            (a native harness's installed CLI); off by default.
        relay_network: the sandbox may open TCP to its controller's relay ports and
            nothing else (the ``kubernetes`` backend, where a socket cannot cross pods:
            the pod is labelled ``native-harness`` for the NetworkPolicy that allows
            exactly that; ``info()["relay"]`` says where to listen and what to dial).
            Backends that reach relays through ``relay_dir`` ignore it; off by default.
    """

    workspace: Path | str
    limits: Limits = field(default_factory=Limits)
    labels: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    relay_dir: str | None = None
    runtime_binds: tuple[tuple[str, str], ...] = ()
    relay_network: bool = False


@dataclass(frozen=True, kw_only=True)
class ExecResult:
    """The outcome of one command.

    ``status`` is ``ok`` when the command ran to an exit code (any code), ``timeout`` when
    it was killed at its timeout, ``resource_limit`` when the kernel killed it for memory
    or it hit the pids limit, ``deadline`` when the sandbox's wall clock ran out.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    status: ExecStatus = "ok"


@dataclass(frozen=True, kw_only=True)
class ExecPlan:
    """A validated command, as ``Sandbox.exec`` hands it to a backend's ``_exec``.

    Attributes:
        argv: the command (a string command is already ``["/bin/sh", "-c", command]``).
        cwd: absolute working folder inside the sandbox.
        env: the caller's extra variables (validated; the backend adds its own base).
        limit: seconds the command may run: its timeout, or less when the sandbox's
            deadline comes first.
        kind: the status of a command killed at ``limit`` (``timeout`` or ``deadline``).
        number: the sandbox's count of commands so far, this one included (1, 2 ...).
    """

    argv: list[str]
    cwd: str
    env: dict[str, str]
    limit: float
    kind: ExecStatus
    number: int


def exec_status(
    kind: ExecStatus,
    *,
    killed: bool,
    past_deadline: bool,
    memory: bool = False,
    pids: bool = False,
) -> ExecStatus:
    """How a command that ran ended, from what its backend saw (every backend's one rule).

    Args:
        kind: the plan's status for a kill at its limit (``ExecPlan.kind``).
        killed: the command was killed (at its limit, by the kernel, or by the deadline).
        past_deadline: the sandbox's wall clock had run out when the command ended.
        memory: the kernel killed a process of the sandbox for memory meanwhile.
        pids: the sandbox hit its pids limit meanwhile.

    A kill after the deadline is ``deadline``; a kill for memory, or while at the pids
    limit, ``resource_limit`` (a fork refused in a command that then exited is no kill: its
    exit code and stderr tell what happened); any other kill ``kind``.

    >>> exec_status("timeout", killed=True, past_deadline=False)
    'timeout'
    >>> exec_status("timeout", killed=True, past_deadline=True)
    'deadline'
    >>> exec_status("timeout", killed=True, past_deadline=False, pids=True)
    'resource_limit'
    >>> exec_status("timeout", killed=False, past_deadline=False, pids=True)
    'ok'
    """
    if killed and past_deadline:
        return "deadline"
    if memory or (killed and pids):
        return "resource_limit"
    return kind if killed else "ok"


def check_env(env: Mapping[str, str], where: str) -> None:
    """Refuse an environment a command cannot be given.

    >>> check_env({"A": "1"}, "exec")
    >>> check_env({"A=B": "1"}, "exec")
    Traceback (most recent call last):
    ...
    dataspace.errors.ConfigError: exec: invalid environment variable 'A=B'
    """
    for key, value in env.items():
        if not isinstance(value, str) or not key or "=" in key or "\0" in key + value:
            raise ConfigError(f"{where}: invalid environment variable {key!r}")


class Sandbox(ABC):
    """One live sandbox. Every method raises ``SandboxClosedError`` after ``close``.

    Attributes:
        id: the sandbox's id (unique on its backend).
        limits: its resource limits.
        collect_report: what the last ``collect`` skipped and why (None when the backend
            does not report it).
    """

    id: str
    limits: Limits
    collect_report: dict[str, object] | None = None

    def __init__(self, *, sandbox_id: str, limits: Limits) -> None:
        self.id = sandbox_id
        self.limits = limits
        self.collect_report = None
        self._lock = threading.Lock()
        self._closed = False
        self._execs = 0
        self._deadline = math.inf

    # -- the clock -------------------------------------------------------------------

    def start_clock(self, at: float | None = None) -> None:
        """Start the wall clock: the deadline is ``limits.wall_seconds`` after ``at``.

        ``at`` is a ``time.monotonic()`` value (default: now), the moment the sandbox
        became ready.
        """
        self._deadline = (time.monotonic() if at is None else at) + self.limits.wall_seconds

    def set_deadline(self, deadline: float) -> None:
        """Set the deadline to a ``time.monotonic()`` value the sandbox itself reported."""
        self._deadline = deadline

    @property
    def deadline(self) -> float:
        """The ``time.monotonic()`` value at which the sandbox's wall clock runs out."""
        return self._deadline

    def seconds_left(self) -> float:
        """Seconds until the deadline (0 once it has passed)."""
        return max(0.0, self._deadline - time.monotonic())

    def past_deadline(self) -> bool:
        """Whether the wall clock has run out."""
        return time.monotonic() >= self._deadline

    @property
    def execs(self) -> int:
        """How many commands were run."""
        return self._execs

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"sandbox {self.id} is closed")

    def _mark_closed(self) -> bool:
        """Mark the sandbox closed; False when it already was (``close`` is idempotent)."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            return True

    # -- commands --------------------------------------------------------------------

    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        cwd: str = OUTPUT_DIR,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run a command (a string runs under ``/bin/sh -c``); never raises for its exit code.

        ``timeout`` defaults to ``limits.command_timeout``; ``cwd`` relative to /output is
        made absolute. After the deadline every command returns status ``deadline``
        without running.

        Raises:
            SandboxClosedError: the sandbox is closed.
            SandboxError: the sandbox itself failed (infrastructure).
            ConfigError: a non-positive timeout, an empty command or a bad variable name.
        """
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        with self._lock:
            self._check_open()
            self._execs += 1
            number = self._execs
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ConfigError(f"sandbox {self.id}: command must be a string or a list of strings")
        timeout = self.limits.command_timeout if timeout is None else timeout
        if timeout <= 0:
            raise ConfigError(f"sandbox {self.id}: timeout must be positive, got {timeout}")
        check_env(env or {}, f"sandbox {self.id} exec env")
        ended = self._ended_result()
        if ended is not None:
            return ended
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            return ExecResult(
                exit_code=None,
                stdout="",
                stderr=f"sandbox {self.id}: wall-clock deadline passed",
                timed_out=False,
                duration=0.0,
                status="deadline",
            )
        kind: ExecStatus = "timeout" if timeout < remaining else "deadline"
        plan = ExecPlan(
            argv=argv,
            cwd=cwd if cwd.startswith("/") else f"{OUTPUT_DIR}/{cwd}",
            env=dict(env or {}),
            limit=min(timeout, remaining),
            kind=kind,
            number=number,
        )
        return self._exec(plan)

    def _ended_result(self) -> ExecResult | None:
        """How every command ends once the sandbox ended for its own limits (None: running)."""
        return None

    @abstractmethod
    def _exec(self, plan: ExecPlan) -> ExecResult:
        """Run a validated command for at most ``plan.limit`` seconds.

        A command killed at ``plan.limit`` gets status ``plan.kind``; killed by the kernel
        for memory, or at the pids limit, ``resource_limit``.

        Raises:
            SandboxError: the sandbox itself failed (infrastructure).
        """

    # -- files -----------------------------------------------------------------------

    @abstractmethod
    def read_file(self, path: str, *, max_bytes: int = 64 * 1024**2) -> bytes:
        """Read a file under /output (absolute or relative to it); no symlinks followed.

        Raises:
            PermissionError: the path leaves /output or involves a link or special file.
            FileNotFoundError: no such file.
            OSError: ``EFBIG`` when the file is larger than ``max_bytes``.
            SandboxError: only when the sandbox itself failed (infrastructure).
        """

    @abstractmethod
    def write_file(self, path: str, data: bytes) -> None:
        """Write a file under /output (absolute or relative to it), parents created.

        Raises:
            PermissionError: the path leaves /output or involves a link or special file.
            OSError: ``ENOSPC`` past the output size limit.
            SandboxError: only when the sandbox itself failed (infrastructure).
        """

    @abstractmethod
    def collect(self, dest: Path) -> list[Path]:
        """Copy the output folder's regular files to ``dest`` (no symlinks, size-limited).

        Sets ``collect_report`` where the backend tells what it skipped.
        """

    @abstractmethod
    def info(self) -> dict[str, object]:
        """Backend facts for the attempt record (how limits are enforced, ids, timings).

        At least ``backend``, ``id``, ``enforcement``, ``runtime``, ``limits``, ``execs``
        and ``seconds_left``; a ``relay_transport`` of ``network`` adds ``relay``
        (``bind``, ``address``, ``ports``) for a sandbox made with ``relay_network``.
        """

    @abstractmethod
    def close(self) -> None:
        """Kill everything, release every resource; idempotent."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@dataclass(frozen=True, kw_only=True)
class PreflightRequest:
    """What a run asks of its sandbox backend, for ``SandboxBackend.preflight``.

    Attributes:
        image: ``sandbox.image`` of the spec (None: the backend's default).
        limits: the limits every sandbox of the run gets (``Limits.for_sandbox``).
        labels: labels of the run's sandboxes (``run``, ``agent``).
        relay: some agent of the run is a native harness that needs a relay.
        distributed: attempts run on a Ray cluster's workers, not in this process's host.
    """

    image: str | None = None
    limits: Limits = field(default_factory=Limits)
    labels: dict[str, str] = field(default_factory=dict)
    relay: bool = False
    distributed: bool = False


class RuntimeChange(NamedTuple):
    """Why a resumed run's recorded runtime differs, and the fix (one clause each)."""

    what: str
    fix: str


class SandboxBackend(ABC):
    """A factory of sandboxes: what the layers above may ask of any backend.

    Subclass it, one subpackage per backend (see the module docstring).
    """

    name: ClassVar[str]
    relay_transport: RelayTransport = "socket"
    harnesses_from_host: bool = False
    default_image: ClassVar[str | None] = None

    @abstractmethod
    def create(self, spec: SandboxSpec) -> Sandbox:
        """Create and start one sandbox with its workspace staged.

        Raises:
            SandboxError: the sandbox could not start (an infrastructure failure: the
                attempt is retried; ``code`` names the cause where the backend knows it).
        """

    @abstractmethod
    def sweep(self, labels: dict[str, str] | None = None) -> int:
        """Remove leftovers (of a crashed controller) matching labels; returns how many."""

    def describe(self) -> str:
        """Where this backend's sandboxes live, for messages (``namespace sb``)."""
        return f"{self.name} backend"

    def preflight(self, request: PreflightRequest) -> list[Check]:
        """What a run with ``request`` will meet, checked without running an attempt.

        The first check is keyed ``sandbox`` (the backend is ready); others are keyed
        ``sandbox.<part>``. Never raises for a failed check.
        """
        return [Check(key="sandbox", ok=True, message=f"{self.name} backend ready")]

    def wait_ready(self, request: PreflightRequest, progress: Callable[[Check], None]) -> None:
        """Wait until the run's sandboxes can start without delay; default: at once.

        Called by the controller once before it fans attempts out. ``progress`` gets a
        :class:`Check` keyed ``sandbox.<part>`` for what is awaited (shown as it goes) and
        one when the wait is over.

        Raises:
            SandboxError: the wait ran out (the message names what is missing and the fix).
        """
        return None

    @classmethod
    def host_checks(cls, options: Mapping[str, Any]) -> list[Check]:
        """Checks of this host for the backend (``dataspace doctor``), no run spec needed."""
        return []

    @classmethod
    def runtime_identity(cls, options: Mapping[str, Any], image: str | None) -> dict[str, Any]:
        """What the agent's filesystem is, as the run fingerprint records it.

        Computed once per run on the controller, without creating a backend.

        Raises:
            SandboxError: the runtime the backend would show is missing here.
        """
        return {"backend": cls.name, "image": image or options.get("image") or cls.default_image}

    @classmethod
    def runtime_change(cls, options: Mapping[str, Any], run_id: str) -> RuntimeChange:
        """The refusal's words when run ``run_id`` recorded another runtime than this one."""
        return RuntimeChange(
            what=f"the sandbox image is not the one run {run_id!r} was made with",
            fix="set sandbox.image back to the recorded image, or give the run a new run_id",
        )


__all__ = [
    "OUTPUT_DIR",
    "RELAY_DIR",
    "TMP_DIR",
    "WORKSPACE_DIR",
    "Check",
    "ExecPlan",
    "ExecResult",
    "ExecStatus",
    "Limits",
    "PreflightRequest",
    "RelayTransport",
    "RuntimeChange",
    "Sandbox",
    "SandboxBackend",
    "SandboxSpec",
    "check_env",
]
