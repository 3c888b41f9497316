"""Answer files the official runner takes and ours refused, through ``dataspace run``.

A scripted DataSpace-Agent (official profile, real Ray, real local sandboxes) answers one
task with ``prediction.csv -> answers/final.csv`` (the official runner copies the link's
target and scores it) and the other with a 24 MB ``prediction.csv`` (the official tool
accepts it and ends the run; the evaluator rejects it as over its 20 MiB limit).
"""

from __future__ import annotations

import json
import shutil

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

ANSWER = "city,population\\nLyon,522000\\nGraz,291000\\nPorto,232000\\n杭州,11940000\\n"
LINKED = (
    f"mkdir -p /output/answers && printf '{ANSWER}' > /output/answers/final.csv && "
    "ln -s answers/final.csv /output/prediction.csv"
)
OVERSIZED = "{ echo city,population; yes Lyon,522000 | head -n 2000000; } > /output/prediction.csv"


def _steps(command: str) -> list[dict]:
    return [
        {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]},
        {
            "tool_calls": [
                {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}
            ]
        },
    ]


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_linked_answer_scores_and_an_oversized_one_ends_the_run(tmp_path, ray_dir):
    """Guards the two protocol differences found replaying the official agent beside ours:
    a linked prediction.csv scored 0% (official scores its target), and an answer over
    20 MiB was refused and cost one more model request (official accepts it and ends)."""
    release = write_tiny_release(tmp_path / "release", tasks=2)
    store = tmp_path / "store"
    scripts = {"task_1": _steps(LINKED), "task_2": _steps(OVERSIZED)}
    with ScriptedServer(scripts) as srv:
        spec = write_spec(
            tmp_path / "s.yaml",
            release,
            store,
            [model_agent(srv.url)],
            limits={"model_turns": 4, "wall_seconds": 120, "command_timeout": 60},
        )
        p = dataspace("run", str(spec), env=cli_env(ray_dir, **{KEY_ENV: SECRET}))
        requests = len(srv.requests)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "accuracy 50.00% (1/2)" in p.stdout, out
    assert requests == 1 + 4  # the preflight probe, then two per task: each ended at its submission
    s = open_store(f"file://{store}")
    rows = {r["task_id"]: r for r in read_results(s.get_bytes("runs/r1/results.parquet"))
            .to_dict("records")}  # fmt: skip
    assert rows["task_1"]["status"] == "submitted" and rows["task_1"]["passed"] is True
    assert rows["task_2"]["status"] == "submitted" and rows["task_2"]["passed"] is False
    assert rows["task_2"]["error_code"] == "invalid_prediction_csv"
    # the linked answer is stored as the file it names; the large one as submitted
    linked = s.get_bytes("runs/r1/predictions/react/task_1/prediction.csv")
    assert bytes(linked).decode() == ANSWER.replace("\\n", "\n")
    meta = json.loads(s.get_bytes("runs/r1/attempts/react/task_1/1/run.json"))
    assert meta["scored_path"] == "/output/answers/final.csv"
