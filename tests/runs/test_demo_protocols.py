"""The demo through both protocol profiles: the gold oracle, then a real DataSpace-Agent loop.

The agent is scripted (the scripted model server plays a trajectory that writes each task's
reference answer with ``bash`` and submits it), but everything else is the real path: the
demo's built release, Ray, the local sandbox, collection, scoring, results and report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),  # the demo's build, on a loaded machine
]

KEY_ENV = "DATASPACE_TEST_DEMO_KEY"
AGENT_TASKS = 4  # demo tasks the scripted agent solves per profile


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, ray_local: Any, build_cache: Path, demo_release: Path
) -> dict[str, Any]:
    """The demo under the default (official) profile, then its gold run again, extended.

    The demo's build takes its items from the session's build cache (``demo_release``
    filled it), so only the run is new."""

    from dataspace.demo import oracle_failures, run_demo
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    out = tmp_path_factory.mktemp("demo-protocols")
    official = run_demo(out, protocol="official", build_cache=build_cache)
    spec = RunSpec(  # the demo's own run, on the release it built, in a store of its own
        run_id="demo-extended",
        release=str(official.release_dir),
        store=f"file://{out / 'store-extended'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(cpus=1.0, memory_bytes=1024**3),
        sandbox=SandboxConfig(backend="local"),
        concurrency=2,
        protocol="extended",
    )
    extended = execute_run(spec)
    return {
        "release_dir": official.release_dir,
        "official": (official.run, official.failures),
        "extended": (extended, oracle_failures(extended.rows)),
    }


@pytest.mark.parametrize("protocol", ["official", "extended"])
def test_gold_demo_is_perfect_under_each_profile(demo: dict[str, Any], protocol: str) -> None:
    """Guards the demo's 100% under both profiles, with the profile on rows and summary."""
    run, failures = demo[protocol]
    assert failures == []
    assert run.rows and {r["protocol"] for r in run.rows} == {protocol}
    assert all(r["passed"] is True for r in run.rows)
    assert run.summary["protocol"] == protocol


def _solving_script(gold: bytes) -> list[dict[str, Any]]:
    text = gold.decode("utf-8")
    assert "DS_END" not in text
    body = text.rstrip("\n")
    write = f"cat > /output/prediction.csv <<'DS_END'\n{body}\nDS_END\nwc -l /output/prediction.csv"
    return [
        {"content": "Looking around first."},  # no tool call: the reminder
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls /workspace | head"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": write}}]},
        {
            "tool_calls": [
                {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}
            ]
        },
    ]


@pytest.mark.parametrize("protocol", ["official", "extended"])
def test_dataspace_agent_solves_demo_tasks_under_each_profile(
    demo: dict[str, Any], protocol: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards a real DataSpace-Agent loop on demo tasks, scored, under both profiles."""
    from dataspace.release import Release
    from dataspace.report.basic import summary_markdown
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import parse_spec

    release = Release(demo["release_dir"])
    tasks = sorted(r["task_id"] for r in demo["official"][0].rows)[:AGENT_TASKS]
    scripts = {t: _solving_script(release.gold_bytes(t)) for t in tasks}
    monkeypatch.setenv(KEY_ENV, "sk-demo-not-a-real-key")
    with ScriptedServer(scripts) as server:
        spec = parse_spec(
            {
                "run_id": f"agent-{protocol}",
                "release": str(release.root),
                "store": str(tmp_path / "store"),
                "protocol": protocol,
                "tasks": tasks,
                "agents": [
                    {
                        "name": "react",
                        "harness": "dataspace-agent",
                        "model": {
                            "id": "scripted-model",
                            "base_url": server.url,
                            "key_env": KEY_ENV,
                        },
                    }
                ],
                "limits": {"wall_seconds": 300, "command_timeout": 60},
                "sandbox": {"backend": "local", "cpus": 1, "memory": "1GiB"},
                "concurrency": 2,
            },
            source="test",
        )
        outcome = execute_run(spec)
    rows = outcome.rows
    assert len(rows) == AGENT_TASKS
    assert all(r["status"] == "submitted" and r["passed"] is True for r in rows), rows
    assert {r["protocol"] for r in rows} == {protocol}
    assert all(r["model_turns"] == 4 and r["tool_actions"] == 3 for r in rows)
    assert f"Protocol: {protocol}." in summary_markdown(outcome.summary)
    # what the model saw differs between the profiles only where the profile says so
    first = next(r for r in server.requests if r.step == 1)
    reminder = first.body["messages"][3]["content"]
    assert ("Time remaining" in reminder) is (protocol == "extended")
    tool = json.loads(
        next(r for r in server.requests if r.step == 2).body["messages"][-1]["content"]
    )
    assert ("time_remaining_seconds" in tool) is (protocol == "extended")
