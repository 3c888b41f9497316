"""The demo end to end, with a Ray worker killed mid-run, then rerun to resume."""

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

pytestmark = [pytest.mark.ray, pytest.mark.sandbox, pytest.mark.integration, pytest.mark.slow]


def _busy_ray_workers() -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            title = (d / "cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            continue
        if title.startswith(b"ray::run_attempt"):
            pids.append(int(d.name))
    return pids


def test_demo_survives_a_killed_worker_and_resumes(tmp_path):
    out = tmp_path / "demo"
    cmd = [sys.executable, "-m", "dataspace.cli", "demo", "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(lambda: proc.stdout.readline().decode(), "")), daemon=True
    )
    reader.start()
    killed: list[int] = []
    deadline = time.monotonic() + 300

    def fault_seen() -> bool:
        return any("infrastructure failure (WorkerCrashedError)" in ln for ln in lines)

    # Kill busy workers until the controller has seen one die mid-attempt (a kill can land
    # just after an attempt finished, which is no fault at all), at most three times.
    while proc.poll() is None and time.monotonic() < deadline:
        if len(killed) < 3 and not fault_seen():
            busy = [p for p in _busy_ray_workers() if p not in killed]
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
                time.sleep(1.0)
        time.sleep(0.005)
    proc.wait(timeout=60)
    reader.join(timeout=60)
    output = "".join(lines)
    assert proc.returncode == 0, output
    assert killed, "no busy Ray worker was seen during the run"
    assert fault_seen(), output

    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 run now" in again.stdout

    store = open_store(f"file://{out / 'store'}")
    df = read_results(store.get_bytes("runs/demo/results.parquet"))
    assert len(df) >= 40
    assert not df.duplicated(["agent", "task_id", "attempt"]).any()
    assert df["passed"].all() and (df["status"] == "submitted").all()
    retried = df[df["infra_retries"] > 0]
    assert 1 <= len(retried) <= len(killed), output
    for _, row in retried.iterrows():
        infra = [k for k in store.list(f"runs/demo/attempts/gold/{row.task_id}/1/infra/")]
        assert len(infra) == row.infra_retries
        assert b"WorkerCrashedError" in store.get_bytes(infra[0])
    assert (out / "store/runs/demo/report.html").is_file()
    assert "100.00%" in again.stdout
