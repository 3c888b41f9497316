import dataclasses
import json

import pytest
from run_specs import gold_spec

from dataspace.errors import ConfigError, SpecChangedError
from dataspace.llm.models import ModelSpec
from dataspace.runs.controller import execute_run, plan_attempts
from dataspace.runs.results import read_results
from dataspace.runs.spec import AgentSpec, Limits
from dataspace.store import open_store

pytestmark = [pytest.mark.ray, pytest.mark.sandbox, pytest.mark.integration]


def test_gold_run_scores_everything_and_resumes(tmp_path, ray_local):
    spec = gold_spec(tmp_path, attempts=2)
    seen = []
    out = execute_run(spec, progress=seen.append)
    assert out.executed == 6 and out.skipped == 0, (
        out.interrupted,
        out.stopped_agents,
        [(r["status"], r.get("error")) for r in out.rows],
    )
    assert seen[0] == {
        "event": "plan",
        "total": 6,
        "done": 0,
        "pending": 6,
        "agents": {"gold": {"total": 6, "done": 0, "passed": 0, "cost_usd": 0}},
    }
    assert {r["status"] for r in out.rows} == {"submitted"}
    assert all(r["passed"] for r in out.rows)
    assert out.summary["agents"]["gold"]["accuracy"] == 1.0

    store = open_store(spec.store)
    keys = set(store.list("runs/t1/"))
    for n in (1, 2):
        for t in ("task_1", "task_2", "task_3"):
            base = f"runs/t1/attempts/gold/{t}/{n}"
            for name in ("events.jsonl", "run.json", "output/prediction.csv", "result.json"):
                assert f"{base}/{name}" in keys
    assert "runs/t1/predictions/gold/task_1/prediction.csv" in keys
    assert "runs/t1/predictions/gold/attempt_2/task_1/prediction.csv" in keys
    run_json = json.loads(store.get_bytes("runs/t1/attempts/gold/task_2/1/run.json"))
    assert run_json["sandbox"]["enforcement"] in {"cgroup-v1", "cgroup-v2", "rlimit"}
    # The runtime manifest is in every attempt record and in the run's fingerprint.
    from dataspace.sandbox import workbench

    runtime = workbench.manifest_identity(workbench.read_manifest())
    assert run_json["sandbox"]["runtime"] == runtime
    assert run_json["sandbox"]["collect"]["files"] >= 1
    assert run_json["sandbox"]["collect"]["skipped"] == {}
    claimed = json.loads(store.get_bytes("runs/t1/spec.json"))
    assert claimed["identity"]["runtime"] == {"backend": "local", **runtime}
    events = store.get_bytes("runs/t1/attempts/gold/task_2/1/events.jsonl").decode()
    assert '"type": "submit"' in events

    df = read_results(store.get_bytes("runs/t1/results.parquet"))
    assert len(df) == 6 and df["passed"].all()
    assert set(df["attempt"]) == {1, 2}
    assert df["phase_agent_seconds"].notna().all()
    assert df["task_metadata"].iloc[0]["domain"] == "geo"

    again = execute_run(spec)
    assert again.executed == 0 and again.skipped == 6
    assert [r["key"] for r in again.rows] == [r["key"] for r in out.rows]


def test_changed_spec_under_the_same_run_id_is_refused(tmp_path, ray_local):
    execute_run(gold_spec(tmp_path, tasks=("task_1",)))
    changed = gold_spec(
        tmp_path, tasks=("task_1",), limits=Limits(model_turns=5, memory_bytes=512 * 1024**2)
    )
    with pytest.raises(SpecChangedError, match=r"limits\.model_turns"):
        execute_run(changed)
    # speed settings are not part of the identity
    faster = dataclasses.replace(gold_spec(tmp_path, tasks=("task_1",)), concurrency=1)
    assert execute_run(faster).skipped == 1


def test_attempt_keys_cover_what_decides_results(tmp_path):
    a = plan_attempts(gold_spec(tmp_path), ["task_1"])[0].key
    b = plan_attempts(gold_spec(tmp_path, limits=Limits(tool_actions=3)), ["task_1"])[0].key
    c = plan_attempts(gold_spec(tmp_path, limits=Limits(cpus=2)), ["task_1"])[0].key
    assert len({a, b, c}) == 3
    assert plan_attempts(gold_spec(tmp_path, concurrency=7), ["task_1"])[0].key == a


@pytest.mark.parametrize(
    ("agent", "needle"),
    [
        (AgentSpec(name="x", harness="no-such-harness"), "unknown harness"),
        (AgentSpec(name="x", harness="dataspace-agent"), "needs a model"),
        (
            AgentSpec(
                name="x",
                harness="dataspace-agent",
                model=ModelSpec(id="m"),
                settings={"temprature": 0.1},
            ),
            "unknown keys ['temprature']",
        ),
    ],
)
def test_bad_agents_fail_before_any_attempt(tmp_path, agent, needle):
    with pytest.raises(ConfigError) as ei:
        execute_run(gold_spec(tmp_path, agents=(agent,)))
    assert needle in str(ei.value) and "agent 'x'" in str(ei.value)
    assert not (tmp_path / "store").exists()


def test_agents_differing_only_by_name_get_their_own_attempts(tmp_path):
    """Guards attempt keys: two agents with the same harness and model collided."""
    model = ModelSpec(id="m", base_url="http://127.0.0.1:1/v1")
    spec = gold_spec(
        tmp_path,
        agents=(
            AgentSpec(name="a", harness="dataspace-agent", model=model),
            AgentSpec(name="b", harness="dataspace-agent", model=model),
        ),
    )
    keys = [p.key for p in plan_attempts(spec, ["task_1", "task_2"])]
    assert len(set(keys)) == 4


def test_prices_and_pace_do_not_change_identity_or_keys(tmp_path):
    model = ModelSpec(id="m", base_url="http://127.0.0.1:1/v1", price_input=1.0)
    agent = AgentSpec(name="a", harness="dataspace-agent", model=model, settings={"x": 1})
    paced = AgentSpec(
        name="a",
        harness="dataspace-agent",
        model=dataclasses.replace(model, price_input=9.0, max_concurrency=1, connect_timeout=3),
        settings={"x": 1, "retry": {"max_retries": 2}},
    )
    s1 = gold_spec(tmp_path, agents=(agent,))
    s2 = gold_spec(tmp_path, agents=(paced,), concurrency=9, max_infra_retries=0, fail_fast_after=1)
    assert s1.identity("r") == s2.identity("r")
    assert plan_attempts(s1, ["task_1"]) == plan_attempts(s2, ["task_1"])
    moved = gold_spec(
        tmp_path, agents=(dataclasses.replace(agent, model=dataclasses.replace(model, id="n")),)
    )
    from dataspace.runs.spec import diff_identity

    assert diff_identity(s1.identity("r"), moved.identity("r")) == ["agents[0].model.id"]
