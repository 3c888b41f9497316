"""An endpoint outage mid-run, and a run stopped mid-way: what is marked, rerun and paid.

Through the CLI against the scripted server: an outage is infrastructure under the official
profile too (marked ``endpoint_unreachable``, exit 1, rerun with ``--retry``), and every
model call is in the cost, including those of attempts killed mid-way, whose scratch
folders are gone as well.
"""

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
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec

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

PRICES = {"input": 2.0, "cached_input": 0.5, "output": 8.0}  # model_agent's, per M tokens


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


def _served_cost(srv: ScriptedServer, tasks: list[str]) -> float:
    """What the replies the server sent for these tasks cost at the agent's prices."""
    total = 0.0
    for t in tasks:
        r = srv.totals(t)
        fresh = r.prompt_tokens - r.cached_tokens
        total += (
            fresh * PRICES["input"]
            + r.cached_tokens * PRICES["cached_input"]
            + r.completion_tokens * PRICES["output"]
        ) / 1e6
    return total


def _step(task: str) -> dict:
    return {
        "tool_calls": [{"name": "bash", "arguments": {"command": "ls /workspace"}}],
        "usage": {"prompt_tokens": 1000 + int(task.split("_")[1]), "completion_tokens": 100},
    }


def _run_cost(store: Path) -> float:
    summary = json.loads((store / "runs/r1/summary.json").read_text())
    return sum(a["cost_usd"] for a in summary["agents"].values())


def test_an_outage_mid_run_is_marked_and_rerun_with_retry(tmp_path, ray_dir):
    """Guards outages under the official profile: they used to become final wrong answers.

    The endpoint dies after 2 of 8 attempts: the attempts it ended keep the official
    ``runtime_error`` but are marked ``endpoint_unreachable``, the screen names the endpoint
    and the count, the exit code is 1, and ``--retry endpoint_unreachable`` reruns exactly
    those (the earlier try kept), ending with 8 rows, none twice, every call paid.
    """
    tasks = [f"task_{i}" for i in range(1, 9)]
    release = write_tiny_release(tmp_path / "release", tasks=8)
    store = tmp_path / "store"
    # every attempt: a tool call, then a reply without one (model_turns: 2 ends it); the
    # second calls of task_3 and task_4 are held until the server dies
    scripts = {"*": [], **{t: [_step(t)] for t in tasks}}
    for t in ("task_3", "task_4"):
        scripts[t] = [_step(t), {"faults": [{"wait": "outage"}], "content": "late"}]
    srv = ScriptedServer(scripts).start()
    try:
        url = srv.url
        spec = write_spec(
            tmp_path / "s.yaml",
            release,
            store,
            [model_agent(url)],
            concurrency=2,
            fail_fast_after=8,
        )
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        proc = subprocess.Popen(
            [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        results = store / "runs/r1/attempts/react"
        try:
            _wait(
                lambda: srv.served("task_3", 1) and srv.served("task_4", 1),
                240,
                "task_3 and task_4 in their second call",
            )
            assert sum(1 for _ in results.glob("*/1/result.json")) == 2  # task_1, task_2
            srv.kill()
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 1, out + err
        line = f"react: 6 attempts ended endpoint_unreachable ({url}): rerun with --retry "
        assert line + "endpoint_unreachable" in err, out + err
        df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
        assert len(df) == 8
        hit = df[df["endpoint_unreachable"]]
        assert sorted(hit["task_id"]) == tasks[2:]
        assert set(hit["status"]) == {"runtime_error"}  # the official outcome stays
        assert all("Connection" in e or "connection" in e for e in hit["error"])
        assert _run_cost(store) == pytest.approx(_served_cost(srv, tasks), rel=1e-9)

        # a plain rerun changes nothing: the official outcome is final until asked
        srv.port_request = _port(spec)
        srv.start()
        assert srv.url == url
        plain = dataspace("run", str(spec), env=env)
        assert plain.returncode == 1 and "8 already finished" in plain.stdout, plain.stdout
        before = {t: srv.served(t, 0) for t in tasks}
        again = dataspace("run", str(spec), "--retry", "endpoint_unreachable", env=env)
    finally:
        srv.stop()
    assert again.returncode == 0, again.stdout + again.stderr
    assert "6 run now, 2 already finished" in again.stdout, again.stdout
    assert [srv.served(t, 0) - before[t] for t in tasks] == [0, 0, 1, 1, 1, 1, 1, 1]
    df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
    assert len(df) == 8 and not df.duplicated(["agent", "task_id", "attempt"]).any()
    assert set(df["status"]) == {"model_turns_exhausted"} and not df["endpoint_unreachable"].any()
    assert list(df["infra_retries"]) == [0, 0, 1, 1, 1, 1, 1, 1]
    # the earlier tries are kept, unchanged, beside their infrastructure record
    for t in tasks[2:]:
        kept = json.loads((store / f"runs/r1/tries/react/{t}/1/try_0/result.json").read_text())
        assert kept["endpoint_unreachable"] is True and kept["status"] == "runtime_error"
        rec = json.loads((results / t / "1/infra/try_0.json").read_text())
        assert rec["code"] == "endpoint_unreachable" and rec["try_id"] == kept["try_id"]
    # every model call is paid once: the scored tries' and the earlier ones' (task_3, task_4)
    assert _run_cost(store) == pytest.approx(_served_cost(srv, tasks), rel=1e-9)
    assert (df["earlier_tries_cost_usd"].fillna(0) > 0).sum() == 2


def test_a_run_stopped_mid_way_pays_every_call_and_leaves_no_scratch(tmp_path, ray_dir):
    """Guards interrupted attempts: their calls were missing from the cost and the spend
    limit (which then let a rerun spend past it), and their ``/tmp/ds-attempt-*`` folders
    stayed behind.
    """
    tasks = ["task_1", "task_2", "task_3"]
    release = write_tiny_release(tmp_path / "release", tasks=3)
    store = tmp_path / "store"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    scripts = {"*": [], "task_1": [_step("task_1")]}
    for t in ("task_2", "task_3"):  # one call paid, the next in progress when stopped
        scripts[t] = [_step(t), {"faults": [{"wait": "stop"}], "content": "late"}]
    srv = ScriptedServer(scripts).start()
    try:
        spec = write_spec(
            tmp_path / "s.yaml", release, store, [model_agent(srv.url)], concurrency=2
        )
        env = cli_env(ray_dir, **{KEY_ENV: SECRET}, TMPDIR=str(scratch))
        proc = subprocess.Popen(
            [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            _wait(
                lambda: srv.served("task_2", 1) and srv.served("task_3", 1),
                240,
                "task_2 and task_3 in their second call",
            )
            assert list(scratch.glob("ds-attempt-*"))  # the running attempts' folders
            os.kill(proc.pid, signal.SIGTERM)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        assert proc.returncode == 1, out
        assert list(scratch.glob("ds-attempt-*")) == []
        summary = json.loads((store / "runs/r1/summary.json").read_text())
        assert summary["interrupted"] is True and summary["finished"] == 1
        # the killed attempts' first calls are in the cost
        assert summary["agents"]["react"]["earlier_tries_cost_usd"] > 0
        assert _run_cost(store) == pytest.approx(_served_cost(srv, tasks), rel=1e-9)

        srv.kill()  # the held calls are never answered; the same server comes back
        srv.port_request = srv.port_request or _port(spec)
        srv.start()
        # the spend limit counts the killed tries' calls too: what was spent is over it
        spent = _run_cost(store)
        capped = write_spec(
            tmp_path / "capped.yaml",
            release,
            store,
            [model_agent(srv.url)],
            concurrency=2,
            spend_limit_usd=round(spent * 0.75, 6),
        )
        served = len(srv.requests)
        stopped = dataspace("run", str(capped), env=env)
        assert stopped.returncode == 1, stopped.stdout + stopped.stderr
        assert "no new attempts scheduled" in stopped.stdout, stopped.stdout
        assert all(r.script == "*" for r in srv.requests[served:])  # only the preflight probe
        again = dataspace("run", str(spec), env=env)
    finally:
        srv.stop()
    assert again.returncode == 0, again.stdout + again.stderr
    assert list(scratch.glob("ds-attempt-*")) == []
    df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
    assert len(df) == 3 and set(df["status"]) == {"model_turns_exhausted"}
    assert _run_cost(store) == pytest.approx(_served_cost(srv, tasks), rel=1e-9)
    assert (df["earlier_tries_cost_usd"].fillna(0) > 0).sum() == 2


def _port(spec: Path) -> int:
    """The scripted server's port, as the spec names it."""
    import yaml

    url = yaml.safe_load(spec.read_text())["agents"][0]["model"]["base_url"]
    return int(url.rsplit(":", 1)[1].split("/")[0])
