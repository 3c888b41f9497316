"""``dataspace report`` on a run that is still going, and on one stopped at its spend limit.

Issue 24: a mid-run report said ``0 of 8 attempts finished`` while 2 results existed and
called the running attempts "never scheduled (for example at a spending limit)"; the
spend-limit line read ``spend limit $0.01 reached ($0.0084 spent)`` (a limit of $0.008
rounded); the accuracy table showed a ``not scheduled`` column twice.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import pytest
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec

from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]

ANSWER = "printf 'city,population\\nLyon,522000\\n' > /output/prediction.csv"
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 0}
SOLVE = [
    {"tool_calls": [{"name": "bash", "arguments": {"command": ANSWER}}], "usage": USAGE},
    {
        "tool_calls": [{"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}],
        "usage": USAGE,
    },
]
HELD = [{**SOLVE[0], "faults": [{"wait": "hold", "timeout": 300}]}, SOLVE[1]]


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _wait_for(what: str, ok, proc: subprocess.Popen, deadline: float = 300.0) -> None:
    end = time.monotonic() + deadline
    while not ok():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < end, f"no {what} within {deadline:.0f} s"
        time.sleep(0.2)


def test_report_while_the_run_is_going_counts_what_is_on_disk(tmp_path, ray_dir):
    """Guards: ``0 of N attempts finished`` mid-run and running attempts "never scheduled"."""
    release = write_tiny_release(tmp_path / "release", tasks=4)
    store = tmp_path / "store"
    run_dir = store / "runs" / "r1"
    scripts = {"*": [], "task_1": SOLVE, "task_2": SOLVE, "task_3": HELD, "task_4": HELD}
    with ScriptedServer(scripts) as srv:
        spec = write_spec(
            tmp_path / "s.yaml", release, store, [model_agent(srv.url)], concurrency=2
        )
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        proc = subprocess.Popen(
            [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            done = [run_dir / f"attempts/react/task_{k}/1/result.json" for k in (1, 2)]
            _wait_for("two results", lambda: all(p.exists() for p in done), proc)
            _wait_for(
                "the held attempts",
                lambda: srv.served("task_3", 0) >= 1 and srv.served("task_4", 0) >= 1,
                proc,
            )
            mid = dataspace("report", str(run_dir), "--traces", "none", env=cli_env())
            md = (run_dir / "report.md").read_text()  # before the run's end rewrites it
        finally:
            srv.open_gate("hold")
            out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    assert mid.returncode == 0, mid.stdout + mid.stderr
    assert "Run r1 is running: partial results (2 of 4 attempts finished)" in mid.stdout
    assert "2 attempt(s) have no result yet (their run is running)" in mid.stdout
    assert "never scheduled" not in mid.stdout
    header = next(line for line in md.splitlines() if line.startswith("| agent | harness"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert len(cells) == len(set(cells)), header  # no column twice
    assert "not scheduled" in cells
    end = dataspace("report", str(run_dir), "--traces", "none", env=cli_env())
    assert end.returncode == 0 and "partial results" not in end.stdout
    assert "no result yet" not in end.stdout


def test_spend_limit_and_spent_are_printed_with_the_same_precision(tmp_path, ray_dir):
    """Guards: ``spend limit $0.01 reached ($0.0084 spent)`` for a limit of $0.008."""
    release = write_tiny_release(tmp_path / "release", tasks=2)
    store = tmp_path / "store"
    with ScriptedServer({"*": SOLVE}) as srv:
        # each attempt: 2 calls of 100 input and 10 output tokens at $2 and $8 per M
        spec = write_spec(
            tmp_path / "s.yaml",
            release,
            store,
            [model_agent(srv.url)],
            spend_limit_usd=0.0005,
        )
        p = dataspace("run", str(spec), env=cli_env(ray_dir, **{KEY_ENV: SECRET}))
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "spend limit $0.0005 reached ($0.00056 spent): no new attempts scheduled" in out
    rep = dataspace("report", str(store / "runs/r1"), "--traces", "none", env=cli_env())
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert "stopped scheduling at its spend limit of $0.0005 ($0.00056 spent)" in rep.stdout
    assert len(re.findall("stopped scheduling", rep.stdout)) == 1, rep.stdout
    assert "1 attempt(s) were never scheduled (a spend limit" in rep.stdout
