"""Interrupting a run (SIGTERM, Ctrl-C) and reporting on one in progress, through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import (
    KEY_ENV,
    SECRET,
    as_terminal_foreground,
    cli_env,
    dataspace,
    model_agent,
    short_ray_dir,
    write_spec,
)

from dataspace.runs.results import read_results
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _start(spec: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
        preexec_fn=as_terminal_foreground,
    )


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_interrupted_run_resumes_losing_and_double_counting_nothing(tmp_path, ray_dir, how):
    release = write_tiny_release(tmp_path / "release", tasks=3)
    store = tmp_path / "store"
    # task_2's first model call hangs (once): the signal lands while it is known to run
    scripts = {
        "*": [],
        "task_1": [],
        "task_2": [{"faults": [{"delay": 120}], "content": "x"}],
        "task_3": [],
    }
    with ScriptedServer(scripts) as srv:
        spec = write_spec(
            tmp_path / "s.yaml", release, store, [model_agent(srv.url)], concurrency=2
        )
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        proc = _start(spec, env)
        first = store / "runs/r1/attempts/react/task_1/1/result.json"
        try:
            _wait(
                lambda: srv.served("task_2", 0) > 0 and first.exists(),
                240,
                "task_1 finished and task_2 running",
            )
            t_signal = time.monotonic()
            if how == "SIGTERM":
                os.kill(proc.pid, signal.SIGTERM)
            else:  # a terminal's Ctrl-C reaches the whole foreground process group
                os.killpg(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=120)
            stopped_in = time.monotonic() - t_signal
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 1, out
        assert "interrupted" in out and "rerun the same command to resume" in out, out
        assert "Traceback" not in out and "SIGTERM received" not in out and "***" not in out
        assert stopped_in < 60, stopped_in
        summary = json.loads((store / "runs/r1/summary.json").read_text())
        assert summary["partial"] is True and summary["interrupted"] is True
        before = first.read_bytes()

        again = dataspace("run", str(spec), env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert first.read_bytes() == before  # the finished attempt was not run again
    df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
    assert len(df) == 3 and not df.duplicated(["agent", "task_id", "attempt"]).any()
    assert set(df["status"]) == {"model_turns_exhausted"}
    assert (df["infra_retries"] == 0).all()
    summary = json.loads((store / "runs/r1/summary.json").read_text())
    assert summary["partial"] is False and len(summary["invocations"]) == 2
    # an attempt cut off by the signal was paid for; its rerun's row carries what it spent
    paid = df["cost_usd"].sum() + df["earlier_tries_cost_usd"].fillna(0.0).sum()
    assert summary["agents"]["react"]["cost_usd"] == pytest.approx(paid)


def test_report_on_a_run_in_progress_says_so(tmp_path, ray_dir):
    release = write_tiny_release(tmp_path / "release", tasks=3)
    store = tmp_path / "store"
    # task_2's first call is held until the report is made: the run is surely in progress
    held = [{"faults": [{"wait": "report-done"}], "content": "thinking"}]
    scripts = {"*": [], "task_1": [], "task_2": held, "task_3": []}
    with ScriptedServer(scripts) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, store, [model_agent(srv.url)])
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        proc = _start(spec, env)
        summary_path = store / "runs/r1/summary.json"
        try:

            def partial_with_one_done() -> bool:
                try:
                    s = json.loads(summary_path.read_text())
                except (OSError, ValueError):
                    return False
                return s["partial"] and s["finished"] >= 1 and srv.served("task_2", 0) > 0

            _wait(partial_with_one_done, 240, "a partial summary with one attempt finished")
            rep = dataspace("report", str(store / "runs/r1"), "--traces", "none", env=cli_env())
            srv.open_gate("report-done")
            out, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "Run r1 is running: partial results" in rep.stdout, rep.stdout
    assert proc.returncode == 0, out
    final = json.loads(summary_path.read_text())
    assert final["partial"] is False and final["finished"] == 3
    first_wall = final["wall_seconds"]
    again = dataspace("run", str(spec), env=env)
    assert again.returncode == 0
    final = json.loads(summary_path.read_text())
    assert len(final["invocations"]) == 2 and final["wall_seconds"] > first_wall
