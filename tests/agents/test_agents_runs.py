"""DataSpace-Agent through the real run loop: scoring, exact accounting, resume, spend cap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agents_helpers import KEY_ENV, PRICES, SECRET, THRESHOLDS, solving_script

from dataspace.llm.usage import Prices, TokenCounts, cost_usd
from dataspace.runs.spec import parse_spec
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration]

PRICE = Prices(
    input=PRICES["price_input"],
    cached_input=PRICES["price_cached_input"],
    output=PRICES["price_output"],
)


def _spec(release: Path, store: Path, url: str, run_id: str, **extra):
    obj = {
        "run_id": run_id,
        "release": str(release),
        "store": str(store),
        "agents": [
            {
                "name": "react",
                "harness": "dataspace-agent",
                "model": {
                    "id": "scripted-model",
                    "base_url": url,
                    "key_env": KEY_ENV,
                    "prices": {
                        "input": PRICE.input,
                        "cached_input": PRICE.cached_input,
                        "output": PRICE.output,
                    },
                },
                "settings": {"retry": {"initial_backoff": 0.01, "max_backoff": 0.05}},
            }
        ],
        "limits": {"wall_seconds": 120, "command_timeout": 30},
        "sandbox": {"backend": "local", "cpus": 1, "memory": "1GiB"},
        "concurrency": 1,
        "protocol": "extended",  # patient retries: fault storms must not end attempts
        **extra,
    }
    return obj


def _row_cost_is_the_formula(row: dict) -> None:
    tokens = TokenCounts(
        input_tokens=row["input_tokens"],
        cached_input_tokens=row["cached_input_tokens"],
        output_tokens=row["output_tokens"],
    )
    assert row["cost_usd"] == cost_usd(tokens, PRICE)


def test_run_attempt_scores_scripted_solutions(tiny_release, local_backend, tmp_path):
    from dataspace.runs.attempt import AttemptRequest, run_attempt

    spec = parse_spec(_spec(tiny_release, tmp_path / "store", "http://unused", "r1"), source="test")
    scripts = {t: solving_script(th) for t, th in THRESHOLDS.items()}
    scripts["task_2"][1]["faults"] = [{"status": 429, "retry_after": 0.01, "times": 5}]
    with ScriptedServer(scripts) as srv:
        agent = spec.agents[0]
        agent = type(agent)(
            name=agent.name,
            harness=agent.harness,
            settings=agent.settings,
            model=type(agent.model)(**{**agent.model.__dict__, "base_url": srv.url}),
        )
        rows = [
            run_attempt(
                AttemptRequest(
                    run_id="r1",
                    store_uri=spec.store,
                    release_root=spec.release,
                    agent=agent,
                    task_id=t,
                    attempt=1,
                    key=f"k{t}",
                    limits=spec.limits,
                    sandbox=spec.sandbox,
                    submitted_at=time.time(),
                    protocol=spec.protocol,
                )
            )
            for t in ("task_1", "task_2")
        ]
        for row in rows:
            rep = srv.totals(row["task_id"])
            assert row["status"] == "submitted" and row["passed"] is True, row
            assert row["protocol"] == "extended"
            assert (
                row["input_tokens"],
                row["cached_input_tokens"],
                row["output_tokens"],
                row["reasoning_tokens"],
            ) == (rep.prompt_tokens, rep.cached_tokens, rep.completion_tokens, rep.reasoning_tokens)
            assert row["model_turns"] == 4 and row["tool_actions"] == 4
            _row_cost_is_the_formula(row)
    assert srv.totals("task_2").faults == 5
    stored = tmp_path / "store" / "runs" / "r1" / "attempts" / "react" / "task_2" / "1"
    trace = (stored / "events.jsonl").read_text()
    assert SECRET not in trace and trace.count('"type": "model_retry"') == 5
    assert SECRET not in (stored / "run.json").read_text()


@pytest.fixture(scope="module")
def ray_here():
    ray = pytest.importorskip("ray")
    os.environ[KEY_ENV] = SECRET  # Ray workers inherit the driver's environment at init
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.mark.ray
@pytest.mark.slow
def test_killed_controller_resumes_without_charging_twice(
    tiny_release, local_backend, ray_here, tmp_path
):
    from dataspace.runs.controller import execute_run

    scripts = {t: solving_script(th) for t, th in THRESHOLDS.items()}
    # the first request of task_2's third step hangs: the controller is killed meanwhile
    scripts["task_2"][2]["faults"] = [{"delay": 60, "times": 1}]
    store = tmp_path / "store"
    with ScriptedServer(scripts) as srv:
        obj = _spec(tiny_release, store, srv.url, "resume")
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(obj))
        code = (
            "import json, sys; from dataspace.runs.spec import parse_spec; "
            "from dataspace.runs.controller import execute_run; "
            "spec = parse_spec(json.load(open(sys.argv[1])), source=sys.argv[1]); "
            "execute_run(spec, ray_init={'num_cpus': 1})"
        )
        env = {**os.environ, KEY_ENV: SECRET}
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(spec_file)],
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        first = store / "runs/resume/attempts/react/task_1/1/result.json"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                hung = srv.served("task_2", 2) > 0
                if first.exists() and hung:
                    break
                time.sleep(0.1)
            assert first.exists() and hung, "the first run did not reach task_2's third turn"
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        before = first.read_bytes()
        calls_before = srv.totals("task_2").replies
        outcome = execute_run(parse_spec(obj, source="resume"))
    assert outcome.skipped == 1 and outcome.executed == 1
    assert first.read_bytes() == before
    rows = {r["task_id"]: r for r in outcome.rows}
    assert {r["status"] for r in rows.values()} == {"submitted"}
    assert all(r["passed"] for r in rows.values())
    for row in rows.values():
        _row_cost_is_the_formula(row)
    # task_2's killed try made real calls: the row is the finished try's, and the killed
    # try's calls are paid beside it (its usage was persisted call by call)
    assert calls_before == 2 and rows["task_2"]["model_turns"] == 4
    assert srv.totals("task_2").prompt_tokens > rows["task_2"]["input_tokens"]
    assert rows["task_2"]["earlier_tries_cost_usd"] > 0
    assert rows["task_1"]["earlier_tries_cost_usd"] is None
    summary = outcome.summary["agents"]["react"]
    assert summary["cost_usd"] == pytest.approx(
        sum(r["cost_usd"] + (r["earlier_tries_cost_usd"] or 0.0) for r in rows.values()),
        rel=1e-12,
    )


@pytest.mark.ray
def test_spend_cap_stops_scheduling_new_attempts(tiny_release, local_backend, ray_here, tmp_path):
    from dataspace.runs.controller import execute_run

    scripts = {t: solving_script(th) for t, th in THRESHOLDS.items()}
    with ScriptedServer(scripts) as srv:
        obj = _spec(tiny_release, tmp_path / "store", srv.url, "capped", spend_limit_usd=1e-9)
        outcome = execute_run(parse_spec(obj, source="capped"))
    statuses = sorted(r["status"] for r in outcome.rows)
    assert statuses == ["not_scheduled", "submitted"]
    assert outcome.summary["stopped_for_spend_limit"] is True
    # one task's script was played; preflight's one call names no task (script None)
    assert len({r.script for r in srv.requests if r.script is not None}) == 1


@pytest.mark.ray
def test_model_keys_reach_ray_workers_started_before_the_key_was_set(
    tiny_release, local_backend, tmp_path, monkeypatch
):
    """Guards key hand-over: a Ray instance already running (its workers started without the
    key in their environment) must still get the controller's key for its attempts."""
    ray = pytest.importorskip("ray")
    from dataspace.runs.controller import execute_run

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.delenv(KEY_ENV)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        monkeypatch.setenv(KEY_ENV, SECRET)
        scripts = {t: solving_script(th) for t, th in THRESHOLDS.items()}
        with ScriptedServer(scripts) as srv:
            obj = _spec(tiny_release, tmp_path / "store", srv.url, "late-key")
            outcome = execute_run(parse_spec(obj, source="late-key"))
        assert {r["status"] for r in outcome.rows} == {"submitted"}
        assert all(r["passed"] for r in outcome.rows)
    finally:
        ray.shutdown()
