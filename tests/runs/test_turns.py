"""Turns: ``concurrency`` agents at once, sandboxes prepared ahead, the turn handed on early.

Real runs on local Ray with real local sandboxes (``dataspace.runs.turns``).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import pytest
from run_specs import gold_spec

from dataspace.runs import attempt as attempt_mod
from dataspace.runs import turns as turns_mod
from dataspace.runs.attempt import AttemptRequest, run_attempt
from dataspace.runs.controller import execute_run
from dataspace.runs.spec import parse_spec
from dataspace.runs.turns import Turns
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release

pytestmark = [pytest.mark.ray, pytest.mark.sandbox, pytest.mark.integration]


def _spec(tmp_path, **kw):
    return gold_spec(tmp_path, **{"run_id": "turns", "concurrency": 1, "prestart": 2, **kw})


def test_a_run_with_sandboxes_prepared_ahead_never_runs_more_agents_than_turns(tmp_path, ray_local):
    """Guards the turns: 1 turn and 2 sandboxes ahead still run one agent at a time."""
    spec = _spec(tmp_path)
    seen: list[dict] = []
    out = execute_run(spec, progress=seen.append)
    assert out.executed == 3 and {r["status"] for r in out.rows} == {"submitted"}
    assert all(r["passed"] for r in out.rows)
    stats = [e for e in seen if e.get("event") == "turns"]
    assert len(stats) == 1 and stats[0]["limit"] == 1, stats
    assert stats[0]["peak"] == 1 and stats[0]["in_use"] == 0, stats  # handed on every time
    lines = [e["check"].line() for e in seen if e.get("event") == "preflight"]
    assert "ok   plan.turns: 1 agents at once; 2 sandboxes prepared ahead (prestart)" in lines
    store = open_store(spec.store)
    for t in ("task_1", "task_2", "task_3"):
        run = json.loads(store.get_bytes(f"runs/turns/attempts/gold/{t}/1/run.json"))
        assert run["turn_seconds"] >= 0.0  # queueing, not wall time
        assert run["wall_seconds"] >= run["phases"]["agent"]


def test_without_prestart_no_turns_are_taken(tmp_path, ray_local):
    """Guards ``prestart: 0``: the controller's old loop, no semaphore, no ``turn`` phase."""
    spec = _spec(tmp_path, run_id="noturns", prestart=0, concurrency=2)
    seen: list[dict] = []
    out = execute_run(spec, progress=seen.append)
    assert out.executed == 3
    assert not [e for e in seen if e.get("event") == "turns"]
    run = json.loads(
        open_store(spec.store).get_bytes("runs/noturns/attempts/gold/task_1/1/run.json")
    )
    assert "turn_seconds" not in run


def test_a_sandbox_waiting_too_long_for_its_turn_is_made_again_when_it_comes(
    tmp_path, ray_local, monkeypatch, caplog
):
    """Guards the wait limit: the first sandbox is closed, a new one runs the agent."""
    monkeypatch.setattr(turns_mod, "TURN_WAIT_LIMIT", 0.5)
    spec = _spec(tmp_path, run_id="wait")
    turns = Turns.hold("wait-test", 1, wall_seconds=60)
    try:
        held = turns.acquire(timeout=None)  # every turn taken: the attempt must wait
        assert held is not None
        req = AttemptRequest(
            run_id="wait",
            store_uri=spec.store,
            release_root=spec.release,
            agent=spec.agents[0],
            task_id="task_1",
            attempt=1,
            key="wait-task_1",
            limits=spec.limits,
            sandbox=spec.sandbox,
            submitted_at=time.time(),
            turns=turns,
        )
        timer = threading.Timer(2.0, turns.release, args=(held,))
        timer.start()
        with caplog.at_level("INFO", logger=attempt_mod.__name__):
            row = run_attempt(req)
        timer.join()
        assert row.status == "submitted" and row.passed
        assert any("no turn within" in r.getMessage() for r in caplog.records)
        run = json.loads(
            open_store(spec.store).get_bytes("runs/wait/attempts/gold/task_1/1/run.json")
        )
        assert run["turn_seconds"] >= 0.5
        assert turns.stats()["in_use"] == 0  # handed on after the agent
    finally:
        turns.close()


def test_prestart_is_read_from_the_spec_and_not_part_of_the_fingerprint(tmp_path):
    """Guards the spec key: validated, and a pace setting (a run resumes with another)."""
    rel = tmp_path / "rel"
    write_tiny_release(rel, tasks=1)
    doc = {
        "run_id": "p",
        "release": str(rel),
        "store": str(tmp_path / "store"),
        "agents": [{"name": "gold", "harness": "gold"}],
        "prestart": 3,
    }
    spec = parse_spec(doc, source="spec.yaml")
    assert spec.prestart == 3
    assert spec.identity("x") == dataclasses.replace(spec, prestart=None).identity("x")
    from dataspace.errors import ConfigError

    with pytest.raises(ConfigError, match="prestart"):
        parse_spec({**doc, "prestart": -1}, source="spec.yaml")
