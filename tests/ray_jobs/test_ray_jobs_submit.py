"""``ray job submit`` of the run entrypoint against a local ``ray start --head``.

The head binds 127.0.0.1 only, with every port chosen free, its own temp folder, usage
statistics and token authentication off. It runs in the foreground (``--block``) so the
test stops exactly the processes it started, never another Ray instance on the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dataspace.testing.releases import write_tiny_release

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # A loopback-only test cluster: no token files of the user's other clusters.
    env["RAY_AUTH_MODE"] = "disabled"
    env.pop("RAY_ADDRESS", None)
    return env


def _descendants(root: int) -> set[int]:
    parents = {}
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


@dataclass(frozen=True)
class Head:
    dashboard: str
    gcs: str


@pytest.fixture(scope="module")
def ray_head() -> Iterator[Head]:
    ray = shutil.which("ray", path=str(VENV_BIN))
    if ray is None:
        pytest.skip("the ray command is not installed in this environment")
    (gcs, dash, nm, om, agent, agent_grpc, metrics, renv, client) = _free_ports(9)
    temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")
    cmd = [
        ray,
        "start",
        "--head",
        "--block",
        "--node-ip-address",
        "127.0.0.1",
        "--port",
        str(gcs),
        "--num-cpus",
        "2",
        "--include-dashboard",
        "true",
        "--dashboard-host",
        "127.0.0.1",
        "--dashboard-port",
        str(dash),
        "--node-manager-port",
        str(nm),
        "--object-manager-port",
        str(om),
        "--dashboard-agent-listen-port",
        str(agent),
        "--dashboard-agent-grpc-port",
        str(agent_grpc),
        "--metrics-export-port",
        str(metrics),
        "--runtime-env-agent-port",
        str(renv),
        "--ray-client-server-port",
        str(client),
        "--temp-dir",
        temp,
        "--disable-usage-stats",
    ]
    head = subprocess.Popen(
        cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    address = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if head.poll() is not None:
                out = head.stdout.read().decode() if head.stdout else ""
                pytest.fail(f"ray start exited with {head.returncode}: {out[-3000:]}")
            probe = subprocess.run(
                [ray, "job", "list", "--address", address],
                env=_env(),
                capture_output=True,
                check=False,
            )
            if probe.returncode == 0:
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the Ray dashboard at {address} did not come up: {probe.stderr[-2000:]!r}"
                )
            time.sleep(1.0)
        yield Head(dashboard=address, gcs=f"127.0.0.1:{gcs}")
    finally:
        family = _descendants(head.pid)
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        for pid in family - {head.pid}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def test_ray_job_submit_runs_a_spec_to_the_end(
    ray_head: Head, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the cluster path: a run submitted as a Ray job finishes and scores 100% (gold)."""
    from dataspace.errors import SandboxError
    from dataspace.sandbox.local import LocalBackend

    try:
        LocalBackend(state_dir=tmp_path / "probe-state")
    except SandboxError as exc:
        pytest.skip(f"the local sandbox cannot run here: {exc}")
    release = write_tiny_release(tmp_path / "release", tasks=3)
    store = tmp_path / "store"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "schema_version: '1.0'\nrun_id: rayjob\n"
        f"release: {release}\nstore: file://{store}\n"
        "agents: [{name: gold, harness: gold}]\n"
        "sandbox: {backend: local, cpus: 1, memory: 1GiB}\n"
        "concurrency: 2\n"
    )
    ray = str(VENV_BIN / "ray")
    job_id = f"ds-run-{os.getpid()}-{int(time.time())}"
    submit = subprocess.run(
        [
            ray,
            "job",
            "submit",
            "--address",
            ray_head.dashboard,
            "--submission-id",
            job_id,
            "--",
            sys.executable,
            "-m",
            "ray_jobs.run",
            str(spec),
            "--no-sweep",
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=str(tmp_path),
    )
    from ray.job_submission import JobStatus, JobSubmissionClient

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    status = JobSubmissionClient(ray_head.dashboard).get_job_status(job_id)
    assert status == JobStatus.SUCCEEDED, (status, submit.stdout[-3000:], submit.stderr[-3000:])
    assert "gold: 3/3 passed (100.00%)" in submit.stdout
    summary = json.loads((store / "runs" / "rayjob" / "summary.json").read_text())
    assert summary["agents"]["gold"]["accuracy"] == 1.0
    assert (store / "runs" / "rayjob" / "results.parquet").is_file()


def test_pod_slots_are_shared_by_every_process_of_the_cluster(
    ray_head: Head, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the cluster-wide creation limit: one slot pool for all Ray workers."""
    import ray

    from dataspace.sandbox._k8s_limits import RaySlots, SlotTimeoutError

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    connected = not ray.is_initialized()
    if connected:
        ray.init(address=ray_head.gcs, log_to_driver=False, configure_logging=False)
    try:
        slots = RaySlots(name=f"dataspace-k8s-slots-test-{os.getpid()}")
        first = slots.acquire("create", 2, timeout=5, ttl=60)
        slots.acquire("create", 2, timeout=5, ttl=60)

        @ray.remote(num_cpus=0)
        def take_one(name: str) -> bool:
            try:
                RaySlots(name=name).acquire("create", 2, timeout=0.3, ttl=60)
            except SlotTimeoutError:
                return False
            return True

        name = f"dataspace-k8s-slots-test-{os.getpid()}"
        assert ray.get(take_one.remote(name)) is False  # another process sees the same pool
        slots.release("create", first)
        assert ray.get(take_one.remote(name)) is True
        assert slots.stats()["peak"]["create"] == 2
        ray.kill(slots.actor)
    finally:
        if connected:
            ray.shutdown()
