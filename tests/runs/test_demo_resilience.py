"""The demo end to end, with a Ray worker killed mid-run, then rerun to resume."""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dataspace.runs.results import read_results
from dataspace.store import open_store

pytestmark = [
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # two demo runs: several minutes on a loaded machine
]


def _title(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return b""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        pid = _parent(pid)
    return False


def _busy_ray_workers(root: int) -> list[int]:
    """Workers inside ``run_attempt`` of the Ray instance under ``root`` (only ours: the
    machine is shared, other Ray instances are never touched)."""
    return [
        int(d.name)
        for d in Path("/proc").iterdir()
        if d.name.isdigit()
        and _title(int(d.name)).startswith(b"ray::run_attempt")
        and _descends_from(int(d.name), root)
    ]


def _stopped(pid: int, timeout: float = 10.0) -> bool:
    """Wait until ``pid`` is in the stopped state (SIGSTOP is delivered asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        if state in ("T", "t"):
            return True
        time.sleep(0.001)
    return False


def _kill_mid_attempt(pid: int) -> bool:
    """SIGKILL ``pid`` only if it is, frozen, still inside ``run_attempt``.

    A Ray worker resets its title to ``ray::IDLE`` before it sends the task's result, so a
    worker frozen while its title still names the task has not delivered the result: the
    kill is certain to be a fault the controller sees.
    """
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return False
    if _stopped(pid) and _title(pid).startswith(b"ray::run_attempt"):
        os.kill(pid, signal.SIGKILL)
        return True
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
    return False


def test_demo_survives_a_killed_worker_and_resumes(tmp_path, build_cache, demo_release):
    out = tmp_path / "demo"
    # the session's build cache, filled by the demo release fixture: the demo's build copies
    # its items instead of building them again
    cmd = [
        sys.executable, "-m", "dataspace.cli", "demo", "--out", str(out),
        "--build-cache", str(build_cache),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(lambda: proc.stdout.readline().decode(), "")), daemon=True
    )
    reader.start()
    killed: list[int] = []
    deadline = time.monotonic() + 600

    def fault_seen() -> bool:
        return any("infrastructure failure (WorkerCrashedError)" in ln for ln in lines)

    # Kill one worker while it is known to be inside an attempt (frozen first, then checked).
    while proc.poll() is None and time.monotonic() < deadline:
        if not killed:
            for pid in _busy_ray_workers(proc.pid):
                if _kill_mid_attempt(pid):
                    killed.append(pid)
                    break
        time.sleep(0.005)
    proc.wait(timeout=600)
    reader.join(timeout=60)
    output = "".join(lines)
    assert proc.returncode == 0, output
    assert killed, "no busy Ray worker was seen during the run"
    assert fault_seen(), output

    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=480)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 run now" in again.stdout

    store = open_store(f"file://{out / 'store'}")
    df = read_results(store.get_bytes("runs/demo/results.parquet"))
    assert len(df) >= 40
    assert not df.duplicated(["agent", "task_id", "attempt"]).any()
    assert df["passed"].all() and (df["status"] == "submitted").all()
    retried = df[df["infra_retries"] > 0]
    assert len(killed) == 1 and len(retried) == 1, output
    for _, row in retried.iterrows():
        infra = [k for k in store.list(f"runs/demo/attempts/gold/{row.task_id}/1/infra/")]
        assert len(infra) == row.infra_retries
        assert b"WorkerCrashedError" in store.get_bytes(infra[0])
    assert (out / "store/runs/demo/report.html").is_file()
    assert "100.00%" in again.stdout
