"""The sandbox contract: one interface, several backends, one shared contract test suite.

A sandbox is created for one attempt with a read-only workspace and a writable output
folder; the agent (or the harness acting for it) runs commands inside it. Inside, the
workspace is at ``/workspace``, the output folder at ``/output`` and scratch space at
``/tmp``. The sandbox has no network at all and sees no controller secrets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from dataspace.limits import Limits

WORKSPACE_DIR = "/workspace"
OUTPUT_DIR = "/output"
TMP_DIR = "/tmp"
RELAY_DIR = "/run/dataspace-relay"
"""Where ``SandboxSpec.relay_dir`` appears inside the sandbox."""

ExecStatus = Literal["ok", "timeout", "resource_limit", "deadline"]


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


@runtime_checkable
class Sandbox(Protocol):
    """One live sandbox. Every method raises ``SandboxClosedError`` after ``close``."""

    id: str

    def exec(
        self,
        command: str | list[str],
        *,
        timeout: float | None = None,
        cwd: str = OUTPUT_DIR,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run a command (a string runs under ``/bin/sh -c``); never raises for its exit code."""
        ...

    def read_file(self, path: str, *, max_bytes: int = 64 * 1024**2) -> bytes:
        """Read a file under /output (absolute or relative to it); no symlinks followed.

        Raises:
            PermissionError: the path leaves /output or involves a link or special file.
            FileNotFoundError: no such file.
            OSError: ``EFBIG`` when the file is larger than ``max_bytes``.
            SandboxError: only when the sandbox itself failed (infrastructure).
        """
        ...

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file under /output (absolute or relative to it), parents created.

        Raises:
            PermissionError: the path leaves /output or involves a link or special file.
            OSError: ``ENOSPC`` past the output size limit.
            SandboxError: only when the sandbox itself failed (infrastructure).
        """
        ...

    def collect(self, dest: Path) -> list[Path]:
        """Copy the output folder's regular files to ``dest`` (no symlinks, size-limited)."""
        ...

    def info(self) -> dict[str, object]:
        """Backend facts for the attempt record (how limits are enforced, ids, timings)."""
        ...

    def close(self) -> None:
        """Kill everything, release every resource; idempotent."""
        ...


@runtime_checkable
class SandboxBackend(Protocol):
    """A factory of sandboxes."""

    name: str

    def create(self, spec: SandboxSpec) -> Sandbox:
        """Create and start one sandbox with its workspace staged."""
        ...

    def sweep(self, labels: dict[str, str] | None = None) -> int:
        """Remove leftovers (of a crashed controller) matching labels; returns how many."""
        ...


__all__ = [
    "OUTPUT_DIR",
    "RELAY_DIR",
    "TMP_DIR",
    "WORKSPACE_DIR",
    "ExecResult",
    "ExecStatus",
    "Limits",
    "Sandbox",
    "SandboxBackend",
    "SandboxSpec",
]
