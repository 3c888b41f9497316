"""``dataspace rescore``: a repaired config changes exactly its task's verdict, no model called."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration]

KEY_ENV = "DATASPACE_TEST_MODEL_KEY"
TASKS = ("task_1", "task_2", "task_3")
GOLD = [["Lyon", "0.52"], ["Graz", "0.29"]]
PREDICTED = "city,share\\nLyon,0.5213\\nGraz,0.2891\\n"  # right to 2 places, not to 4


def _csv(rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def _config(task: str, digits: int) -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "task_id": task,
        "order_sensitive": False,
        "columns": [
            {"gold_index": 0, "gold_name": "city", "type": "text"},
            {
                "gold_index": 1,
                "gold_name": "share",
                "type": "number",
                "comparison": {"mode": "decimal_places", "digits": digits},
            },
        ],
    }


@pytest.fixture
def scored_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A release of three tasks and a run whose three predictions fail at 4 decimal places."""
    try:
        from dataspace.sandbox import get_backend

        get_backend("local")
    except Exception as exc:
        pytest.skip(f"local sandbox backend unavailable: {exc}")
    from dataspace.release import ReleaseWriter, TaskArtifacts
    from dataspace.runs.attempt import AttemptRequest, run_attempt
    from dataspace.runs.results import rows_to_parquet
    from dataspace.runs.spec import parse_spec

    monkeypatch.setenv(KEY_ENV, "sk-test-rescore")
    release = tmp_path / "release"
    with ReleaseWriter(release) as w:
        for task in TASKS:
            w.add_task(
                TaskArtifacts(
                    task_id=task,
                    question="What share of the population lives in each city?",
                    context={"cities.csv": _csv([["city", "share"], *GOLD])},
                    gold_csv=_csv([["city", "share"], *GOLD]),
                    config=_config(task, 4),
                )
            )
    for p in [release, *release.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    script = [
        {
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {"command": f"printf '{PREDICTED}' > /output/prediction.csv"},
                }
            ]
        },
        {
            "tool_calls": [
                {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}
            ]
        },
    ]
    store = tmp_path / "store"
    with ScriptedServer({t: script for t in TASKS}) as srv:
        spec = parse_spec(
            {
                "run_id": "r",
                "release": str(release),
                "store": str(store),
                "agents": [
                    {
                        "name": "react",
                        "harness": "dataspace-agent",
                        "model": {"id": "scripted-model", "base_url": srv.url, "key_env": KEY_ENV},
                    }
                ],
                "limits": {"wall_seconds": 120, "command_timeout": 30},
                "sandbox": {"backend": "local", "cpus": 1, "memory": "1GiB"},
            },
            source="test",
        )
        rows = [
            run_attempt(
                AttemptRequest(
                    run_id="r",
                    store_uri=str(store),
                    release_root=str(release),
                    agent=spec.agents[0],
                    task_id=t,
                    attempt=1,
                    key=f"k{t}",
                    limits=spec.limits,
                    sandbox=spec.sandbox,
                    submitted_at=time.time(),
                )
            )
            for t in TASKS
        ]
        requests = len(srv.requests)
    assert [r["error_code"] for r in rows] == ["relation_mismatch"] * 3
    run_dir = store / "runs" / "r"
    (run_dir / "results.parquet").write_bytes(rows_to_parquet(rows))
    (run_dir / "spec.json").write_text(json.dumps({"spec": {"release": str(release)}}))
    assert requests == 6
    return run_dir, release


def test_rescore_after_repairing_one_config(scored_run, capsys) -> None:
    from dataspace.cli import main
    from dataspace.runs.results import read_results

    run_dir, release = scored_run
    before = (run_dir / "results.parquet").read_bytes()
    # the same evaluator and configs: nothing changes
    assert main(["rescore", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "rescored 3 attempts (0 kept as they were): 0 verdict(s) changed" in out
    # repair task_2's config (2 decimal places, as the question asks)
    (release / "evaluation" / "configs" / "task_2.json").write_text(
        json.dumps(_config("task_2", 2))
    )
    assert main(["rescore", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "1 verdict(s) changed" in out
    assert "react task_2 attempt 1: incorrect (relation_mismatch) -> correct" in out
    assert "rescore-2/results.parquet" in out
    new = read_results((run_dir / "rescore-2" / "results.parquet").read_bytes())
    by_task = dict(zip(new["task_id"], new["passed"], strict=True))
    assert by_task == {"task_1": False, "task_2": True, "task_3": False}
    doc = json.loads((run_dir / "rescore-2" / "rescore.json").read_text())
    assert [c["task_id"] for c in doc["changes"]] == ["task_2"]
    # the run's own results are untouched; the first rescore is still there
    assert (run_dir / "results.parquet").read_bytes() == before
    assert (run_dir / "rescore-1" / "results.parquet").is_file()
    # the report reads a rescored version like a run
    assert main(["report", str(run_dir / "rescore-2"), "--traces", "none"]) == 0


def test_rescore_errors_are_one_line(tmp_path: Path, capsys) -> None:
    from dataspace.cli import main

    assert main(["rescore", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no results file" in err
