"""A real Ray head on loopback for tests: ``ray start --head --block`` with every port free.

The head binds 127.0.0.1 only, uses a temp folder of its own and runs in the foreground
(``--block``), so :meth:`RayHead.stop` ends exactly the processes it started (the command
and its descendants), never another Ray instance on the machine. Token authentication is
on when a token is given (``RAY_AUTH_MODE=token``), off otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

logger = logging.getLogger(__name__)


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports that were free a moment ago."""
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def descendants(root: int) -> set[int]:
    """``root`` and every process below it, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_bytes()
                parents[int(entry)] = int(stat.rsplit(b")", 1)[1].split()[1])
    found, grew = {root}, True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return found


class RayHead:
    """One ``ray start --head`` on 127.0.0.1 (use as a context manager).

    Args:
        ray: the ``ray`` command (the venv's).
        env: the environment the head (and so every Ray process and worker) starts with.
        token: a token for token authentication (None: authentication off).
        dashboard: start the dashboard and job server (``ray job submit`` needs them).
        timeout: seconds the head may take to answer.
    """

    def __init__(
        self,
        ray: str,
        *,
        env: Mapping[str, str],
        token: str | None = None,
        dashboard: bool = False,
        timeout: float = 120.0,
    ) -> None:
        self.ray = ray
        self.token = token
        self.dashboard_enabled = dashboard
        self.timeout = timeout
        (self.gcs_port, self.dashboard_port, *self._ports) = free_ports(9)
        self.temp = tempfile.mkdtemp(prefix="rh", dir="/tmp")  # Ray's socket paths stay short
        self.env = dict(env)
        self.env["RAY_USAGE_STATS_ENABLED"] = "0"
        self.env.pop("RAY_ADDRESS", None)
        self.env.pop("RAY_AUTH_TOKEN_PATH", None)
        if token:
            self.env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
        else:
            self.env["RAY_AUTH_MODE"] = "disabled"
            self.env.pop("RAY_AUTH_TOKEN", None)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def gcs(self) -> str:
        """The GCS address (``ray.address``)."""
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard(self) -> str:
        """The dashboard / job server address (``ray job submit --address``)."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def client_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with this head's authentication settings (what a client needs)."""
        env = {k: v for k, v in base.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
        env["RAY_AUTH_MODE"] = self.env["RAY_AUTH_MODE"]
        env.pop("RAY_AUTH_TOKEN", None)
        if self.token:
            env["RAY_AUTH_TOKEN"] = self.token
        return env

    def start(self, tries: int = 3) -> RayHead:
        """Start the head and wait until it answers; a busy machine gets more tries.

        ``ray start`` gives up on its own after 30 s ("node timed out during startup")
        when the machine is very busy; what it started is killed and it is run again,
        on fresh ports, at most ``tries`` times in all.
        """
        for n in range(1, tries + 1):
            try:
                return self._start()
            except RuntimeError as exc:
                if n == tries:
                    raise
                logger.warning("ray head: start %d of %d failed: %s", n, tries, exc)
                (self.gcs_port, self.dashboard_port, *self._ports) = free_ports(9)
                self.temp = tempfile.mkdtemp(prefix="rh", dir="/tmp")
        raise AssertionError("unreachable")

    def _start(self) -> RayHead:
        nm, om, agent, agent_grpc, metrics, renv, client = self._ports
        cmd = [
            self.ray, "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
            "--port", str(self.gcs_port), "--num-cpus", "2",
            "--include-dashboard", "true" if self.dashboard_enabled else "false",
            "--dashboard-host", "127.0.0.1", "--dashboard-port", str(self.dashboard_port),
            "--node-manager-port", str(nm), "--object-manager-port", str(om),
            "--dashboard-agent-listen-port", str(agent),
            "--dashboard-agent-grpc-port", str(agent_grpc),
            "--metrics-export-port", str(metrics), "--runtime-env-agent-port", str(renv),
            "--ray-client-server-port", str(client), "--temp-dir", self.temp,
            "--disable-usage-stats",
        ]  # fmt: skip
        log = open(Path(self.temp) / "head.log", "wb")  # noqa: SIM115 - the head keeps it
        self.proc = subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + self.timeout
        while not self._ready():
            if self.proc.poll() is not None:
                tail = (Path(self.temp) / "head.log").read_text(errors="replace")[-3000:]
                code = self.proc.returncode
                self.stop()
                raise RuntimeError(f"ray start exited with {code}: {tail}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the Ray head did not answer within {self.timeout:g} s")
            time.sleep(0.5)
        return self

    def _ready(self) -> bool:
        if "Ray runtime started" not in (Path(self.temp) / "head.log").read_text(errors="replace"):
            return False
        if not self.dashboard_enabled:
            return True
        probe = subprocess.run(
            [self.ray, "job", "list", "--address", self.dashboard],
            env=self.client_env(self.env),
            capture_output=True,
            check=False,
        )
        return probe.returncode == 0

    def stop(self) -> None:
        """End the head and every process it started; remove its temp folder."""
        if self.proc is not None:
            family = descendants(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for pid in family - {self.proc.pid}:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            # what it started and left when it exited on its own: its process group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc = None
        shutil.rmtree(self.temp, ignore_errors=True)

    def __enter__(self) -> RayHead:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["RayHead", "descendants", "free_ports"]
