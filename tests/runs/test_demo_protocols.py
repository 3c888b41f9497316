"""The demo as a user runs it, through both protocol profiles.

``dataspace demo`` runs the gold oracle under the official profile with one Ray worker killed
mid-attempt, then again to resume; its release then takes the gold oracle under the extended
profile, and a real DataSpace-Agent loop under each. The agent is scripted (the scripted
model server plays a trajectory that writes each task's reference answer with ``bash`` and
submits it), but everything else is the real path: the demo's built release, Ray, the local
sandbox, collection, scoring, results and report.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dataspace.runs.results import read_results
from dataspace.store import open_store
from dataspace.testing.ray_head import descendants
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),  # the demo's build and two demo runs, on a loaded machine
]

KEY_ENV = "DATASPACE_TEST_DEMO_KEY"
AGENT_TASKS = 4  # demo tasks the scripted agent solves per profile


def _title(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return b""


def _busy_ray_workers(root: int) -> list[int]:
    """Workers inside ``run_attempt`` of the Ray instance under ``root`` (only ours: the
    machine is shared, other Ray instances are never touched)."""
    return [pid for pid in descendants(root) if _title(pid).startswith(b"ray::run_attempt")]


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


@pytest.fixture(scope="module")
def demo_cli(tmp_path_factory: pytest.TempPathFactory, build_cache: Path, demo_release: Path):
    """``dataspace demo`` with one Ray worker killed while it is inside an attempt, then the
    same command again. The session's build cache (filled by ``demo_release``) gives the
    demo's build every item, so only the runs are new."""
    out = tmp_path_factory.mktemp("demo-cli") / "demo"
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
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=480)
    return {
        "out": out,
        "first": (proc.returncode, "".join(lines)),
        "killed": killed,
        "again": again,
    }


def test_demo_survives_a_killed_worker_and_resumes(demo_cli: dict[str, Any]) -> None:
    code, output = demo_cli["first"]
    killed, again, out = demo_cli["killed"], demo_cli["again"], demo_cli["out"]
    assert code == 0, output
    assert killed, "no busy Ray worker was seen during the run"
    assert "infrastructure failure (WorkerCrashedError)" in output, output

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


@pytest.fixture(scope="module")
def demo(demo_cli: dict[str, Any], ray_local: Any, tmp_path_factory: pytest.TempPathFactory):
    """The demo's own run (official profile, from ``demo_cli``'s store), then a gold run of
    its release under the extended profile, in a store of its own."""
    from dataspace.demo import oracle_failures
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    out = demo_cli["out"]
    store = open_store(f"file://{out / 'store'}")
    rows = read_results(store.get_bytes("runs/demo/results.parquet")).to_dict("records")
    summary = json.loads(store.get_bytes("runs/demo/summary.json"))
    spec = RunSpec(  # the demo's release again, extended, in a store of its own
        run_id="demo-extended",
        release=str(out / "release"),
        store=f"file://{tmp_path_factory.mktemp('demo-extended') / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(cpus=1.0, memory_bytes=1024**3),
        sandbox=SandboxConfig(backend="local"),
        concurrency=2,
        protocol="extended",
    )
    extended = execute_run(spec)
    return {
        "release_dir": out / "release",
        "official": (rows, summary, oracle_failures(rows)),
        "extended": (extended.rows, extended.summary, oracle_failures(extended.rows)),
    }


@pytest.mark.parametrize("protocol", ["official", "extended"])
def test_gold_demo_is_perfect_under_each_profile(demo: dict[str, Any], protocol: str) -> None:
    """Guards the demo's 100% under both profiles, with the profile on rows and summary."""
    rows, summary, failures = demo[protocol]
    assert failures == []
    assert rows and {r["protocol"] for r in rows} == {protocol}
    assert all(r["passed"] is True for r in rows)
    assert summary["protocol"] == protocol


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
    tasks = sorted(r["task_id"] for r in demo["official"][0])[:AGENT_TASKS]
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
