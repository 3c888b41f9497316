"""Ray start-up: a bounded local start with one clean retry, and heads that are not Ray.

The error paths are made deterministic: a start-up timeout far below what any Ray start
takes (starting Python and importing Ray alone take longer), and loopback ports where
something other than a Ray head listens.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from cli_helpers import cli_env, dataspace, short_ray_dir, write_spec

from dataspace.errors import ConfigError
from dataspace.runs.ray_start import (
    START_TIMEOUT_ENV,
    check_reachable,
    resolve_start_timeout,
)
from dataspace.testing.releases import write_tiny_release


class _Listener:
    """A loopback TCP server that is not Ray: silent, or answering like an HTTP/1 server."""

    def __init__(self, reply: bytes | None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply is not None:
                conn.recv(1024)
                conn.sendall(self.reply)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


@pytest.mark.parametrize(
    ("reply", "words"),
    [(None, "no answer within 1 s"), (b"HTTP/1.1 400 Bad Request\r\n\r\n", "not a Ray head")],
)
def test_a_port_where_ray_is_not_is_refused_in_bounded_time(reply, words):
    """Guards ``ray.address`` pointing at a port that accepts but is no Ray head (a hang)."""
    server = _Listener(reply)
    try:
        t0 = time.monotonic()
        with pytest.raises(ConfigError) as err:
            check_reachable(f"127.0.0.1:{server.port}", timeout=1.0)
        assert time.monotonic() - t0 < 30
    finally:
        server.close()
    text = str(err.value)
    assert text.startswith("ray.address '127.0.0.1:") and words in text
    assert "\n" not in text


def test_the_start_timeout_is_configurable(monkeypatch):
    """Guards the resolution order: the environment, then the spec, then the default."""
    monkeypatch.delenv(START_TIMEOUT_ENV, raising=False)
    assert resolve_start_timeout(None) == 90.0 and resolve_start_timeout(12) == 12.0
    monkeypatch.setenv(START_TIMEOUT_ENV, "7.5")
    assert resolve_start_timeout(12) == 7.5
    monkeypatch.setenv(START_TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigError, match=START_TIMEOUT_ENV):
        resolve_start_timeout(None)


def test_doctor_and_run_name_a_ray_address_that_is_not_ray(tmp_path):
    """Guards the screen: one line naming ``ray.address``, exit 2, nothing recorded."""
    release = write_tiny_release(tmp_path / "rel", tasks=1)
    server = _Listener(b"SSH-2.0-OpenSSH_9.2\r\n")
    try:
        spec = write_spec(
            tmp_path / "spec.yaml",
            release,
            tmp_path / "store",
            [{"name": "gold", "harness": "gold"}],
            ray={"address": f"127.0.0.1:{server.port}"},
        )
        env = cli_env()
        doc = dataspace("doctor", str(spec), env=env)
        run = dataspace("run", str(spec), env=env)
    finally:
        server.close()
    assert doc.returncode == 2, doc.stderr
    assert "FAIL ray.address: ray.address" in doc.stdout and "not a Ray head" in doc.stdout
    assert run.returncode == 2, run.stderr
    assert "ray.address" in run.stderr and "Traceback" not in run.stderr + run.stdout
    assert not (tmp_path / "store" / "runs" / "r1" / "spec.json").exists()


def _survivors(marker: str) -> list[int]:
    """Processes whose environment holds ``marker`` (everything the command started)."""
    found = []
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ:
            found.append(int(entry))
    return found


def _wait_gone(marker: str, seconds: float = 60.0) -> list[int]:
    deadline = time.monotonic() + seconds
    left = _survivors(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _survivors(marker)
    return left


def test_a_local_start_that_times_out_is_cleaned_up_reported_and_resumable(tmp_path):
    """Guards Ray start-up under load: bounded, retried once, one line, nothing left over.

    The first command cannot start Ray in its (forced) time; it exits 1 with one line
    naming ray and the fix, having killed what it started and recorded nothing (the spec
    was recorded before Ray started). The same command with the default timeout then runs
    the run to the end, and leaves no process behind.
    """
    release = write_tiny_release(tmp_path / "rel", tasks=2)
    spec = write_spec(
        tmp_path / "spec.yaml", release, tmp_path / "store", [{"name": "gold", "harness": "gold"}]
    )
    marker = f"DATASPACE_TEST_MARK_{uuid.uuid4().hex}"
    ray_dir = short_ray_dir()
    env = cli_env(ray_dir, **{marker: "1", START_TIMEOUT_ENV: "0.3"})
    failed = dataspace("run", str(spec), env=env)
    assert failed.returncode == 1, failed.stderr
    errors = [ln for ln in failed.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, failed.stderr
    assert errors[0].startswith("error: ray: the local Ray instance did not start (2 tries")
    assert START_TIMEOUT_ENV in errors[0] and "ray start --head" in errors[0]
    assert "Traceback" not in failed.stderr + failed.stdout
    assert not (tmp_path / "store" / "runs" / "r1" / "spec.json").exists()
    assert _wait_gone(marker) == []

    del env[START_TIMEOUT_ENV]
    done = dataspace("run", str(spec), env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "2 run now" in done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    assert _wait_gone(marker) == []


def _run_probe(script: str) -> str:
    """The output of ``script``, run by a fresh Python with a Ray temp root of its own,
    once every process it started is gone."""
    ray_dir = short_ray_dir()
    try:
        p = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True, text=True, env=cli_env(ray_dir), timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
        assert _wait_gone(str(ray_dir)) == []
        return p.stdout
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


_LEAN_PROBE = """
import glob, json, os, signal, sys, time, ray
from dataspace.runs import ray_start
ray_start.connect_ray(num_cpus=1)
head = ray_start._head


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\\0", b" ").decode()
    except OSError:
        return None


procs = {pid: cmdline(pid) for pid in ray_start._descendants(head.proc.pid)}
task = ray.remote(num_cpus=0.5)(lambda: os.getpid())
worker = ray.get(task.remote(), timeout=120)
session = ray._private.worker._global_node.get_session_dir_path()
ports = {os.path.basename(f): open(f).read() for f in glob.glob(f"{session}/*_port_*")}
# the raylet is killed: the agents' stand-ins end with it
stubs = [p for p, c in procs.items() if c and c.startswith("/bin/sh -c")]
raylet = [p for p, c in procs.items() if c and c.split()[0].endswith("/raylet")]
os.kill(raylet[0], signal.SIGKILL)
deadline = time.monotonic() + 30
while any(cmdline(p) is not None for p in stubs) and time.monotonic() < deadline:
    time.sleep(0.05)
print("SEEN", json.dumps({"procs": [c for c in procs.values() if c], "worker": worker,
      "ports": ports, "stubs": len(stubs),
      "stub_left": any(cmdline(p) is not None for p in stubs)}))
sys.stdout.flush()
ray_start._kill_tree(head.proc)
os._exit(0)
"""


def test_a_local_instance_starts_without_dashboard_autoscaler_or_log_monitor():
    """Guards the lean local start: the run's own instance has its GCS and raylet and runs
    tasks, and no dashboard (API) server, autoscaler monitor or log monitor process. Its
    dashboard agent and its runtime-env agent are stand-in shells, which wrote the ports
    Ray's minimal agent writes and the runtime-env agent's port (-1: not in use) and end
    when the raylet is killed."""
    out = _run_probe(_LEAN_PROBE)  # Ray may write lines of its own once the raylet is killed
    seen = json.loads(next(ln[5:] for ln in out.splitlines() if ln.startswith("SEEN ")))
    procs = seen["procs"]
    assert seen["worker"] > 0
    assert any("gcs_server" in c for c in procs), procs
    raylet = next(c.split()[0] for c in procs if c.split()[0].endswith("/raylet"))
    for absent in ("dashboard/dashboard.py", "autoscaler/_private/monitor.py", "log_monitor.py"):
        assert not any(absent in c for c in procs), (absent, procs)
    for agent in ("dashboard/agent.py", "runtime_env/agent/main.py"):
        agents = [c for c in procs if agent in c and not c.startswith(raylet)]
        assert len(agents) == 1 and agents[0].startswith("/bin/sh -c "), procs
        assert not any("python" in c.split()[0] for c in agents), agents
    written = {name.rsplit("_", 1)[0]: value for name, value in seen["ports"].items()}
    for name in (
        "metrics_agent_port",
        "metrics_export_port",
        "dashboard_agent_listen_port",
        "runtime_env_agent_port",
    ):
        assert written.get(name) == "-1", seen["ports"]
    assert seen["stubs"] == 2 and seen["stub_left"] is False


_RUNTIME_ENV_PROBE = """
import json, os, ray
from dataspace.runs import ray_start
ray_start.connect_ray(num_cpus=1)
lean = ray_start._head
ray.shutdown()  # the instance runs on; the next driver asks for a runtime environment
ray_start.connect_ray(num_cpus=1, runtime_env={"env_vars": {"PROBE_VALUE": "seen"}})
task = ray.remote(num_cpus=0.5)(lambda: os.environ.get("PROBE_VALUE"))
print("SEEN", json.dumps({"value": ray.get(task.remote(), timeout=120),
      "new_instance": ray_start._head is not lean, "lean_stopped": lean.proc.poll() is not None,
      "agent": ray_start._head.runtime_envs}))
ray_start.stop_local_ray()
"""


def test_a_driver_that_asks_for_a_runtime_environment_gets_rays_runtime_env_agent():
    """Guards the runtime-env agent's stand-in: a runtime environment asked of an instance
    without Ray's agent ends its raylet after 30 s. A driver that asks for one gets a new
    instance with Ray's agent (the lean one it would have joined is stopped), and its task
    sees the environment's variable."""
    out = _run_probe(_RUNTIME_ENV_PROBE)
    seen = json.loads(next(ln[5:] for ln in out.splitlines() if ln.startswith("SEEN ")))
    assert seen == {"value": "seen", "new_instance": True, "lean_stopped": True, "agent": True}


_STOP_PROBE = """
import json, os, ray
from dataspace.runs import ray_start
ray_start.connect_ray(num_cpus=1)
first = ray.get_runtime_context().gcs_address
head = ray_start._head.proc.pid
procs = [head, *ray_start._descendants(head)]
stopped = ray_start.stop_local_ray()


def running(pid):  # a zombie has ended, only its parent has not collected it yet
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


left = [p for p in procs if running(p)]
connected = ray.is_initialized()
again = ray_start.stop_local_ray()
ray_start.connect_ray(num_cpus=1)
task = ray.remote(num_cpus=0.5)(lambda: os.getpid())
print(json.dumps({"stopped": stopped, "left": left, "connected": connected, "again": again,
                  "first": first, "second": ray.get_runtime_context().gcs_address,
                  "worker": ray.get(task.remote(), timeout=120)}))
"""


def test_stop_local_ray_ends_the_instance_and_the_next_connect_starts_a_new_one():
    """Guards stop_local_ray: every process of the local instance is gone when it returns,
    a second call finds nothing to stop, and connect_ray then starts a new instance that
    runs tasks."""
    seen = json.loads(_run_probe(_STOP_PROBE).strip().splitlines()[-1])
    assert seen["stopped"] is True and seen["again"] is False
    assert seen["left"] == [] and seen["connected"] is False
    assert seen["second"] != seen["first"] and seen["worker"] > 0


_AUTH_PROBE = """
import os, sys, ray
from dataspace.runs import ray_start
from dataspace.testing.ray_head import RayHead

ray_start.connect_ray(num_cpus=1)
ray_start.stop_local_ray()
# a cluster joined without authentication: this process's Ray reads RAY_AUTH_MODE=disabled
saved = os.environ["RAY_AUTH_MODE"]
os.environ["RAY_AUTH_MODE"] = "disabled"
env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_TOKEN", "RAY_ADDRESS")}
with RayHead(os.path.join(os.path.dirname(sys.executable), "ray"), env=env) as other:
    ray.init(address=other.gcs, log_to_driver=False, configure_logging=False)
    ray.shutdown()
os.environ["RAY_AUTH_MODE"] = saved
ray_start.connect_ray(num_cpus=1, start_timeout=60)
task = ray.remote(num_cpus=0.5)(lambda: os.getpid())
print("worker", ray.get(task.remote(), timeout=120))
ray_start.stop_local_ray()
"""


def test_a_local_start_after_joining_a_cluster_without_authentication_sends_its_token():
    """Guards the token of a local instance: a process whose earlier ``ray.init`` joined a
    cluster without authentication starts and joins its own instance (with a token) and runs
    a task on it, instead of being refused by it."""
    out = _run_probe(_AUTH_PROBE)
    assert int(out.split("worker", 1)[1].split()[0]) > 0, out


_STALE_AUTH_PROBE = """
import json, os, ray
from ray._private.authentication.authentication_utils import is_token_auth_enabled
from dataspace.runs.ray_start import reread_auth_settings
saved = {k: os.environ.pop(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN")}
reread_auth_settings()  # Ray reads the settings while a test has them removed
os.environ.update(saved)  # the test's change undone: Ray still holds what it read
stale = is_token_auth_enabled()
reread_auth_settings()
fresh = is_token_auth_enabled()
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
worker = ray.get(ray.remote(num_cpus=0.5)(lambda: os.getpid()).remote(), timeout=120)
ray.shutdown()
print(json.dumps({"stale": stale, "fresh": fresh, "worker": worker}))
"""


def test_a_plain_ray_init_after_the_settings_are_read_again_sends_the_token():
    """Guards reread_auth_settings (each test file starts with it, ``tests/conftest.py``):
    after Ray read its authentication settings while the environment had none, it holds
    "no token" though the environment asks for one again; read again, a plain ``ray.init``
    starts an instance whose driver sends the token (stale, it failed to start the GCS)."""
    import secrets

    script = (
        f"import os\nos.environ['RAY_AUTH_MODE'] = 'token'\n"
        f"os.environ['RAY_AUTH_TOKEN'] = '{secrets.token_hex(32)}'\n" + _STALE_AUTH_PROBE
    )
    seen = json.loads(_run_probe(script).strip().splitlines()[-1])
    assert seen["stale"] is False and seen["fresh"] is True
    assert seen["worker"] > 0
