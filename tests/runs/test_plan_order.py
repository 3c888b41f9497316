"""The plan order through ``dataspace run``: longest expected attempts first, shown and recorded.

The store holds an earlier run (its ``results.parquet``) of two of the backbones; the other
one is known from the paper's figures only. The new run lists its agents shortest first; it
must start them longest first, print how the order was chosen as a preflight line, and
write the order to ``runs/<id>/order.json``.
"""

from __future__ import annotations

import json
import shutil

import pytest
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec

from dataspace.runs.results import rows_to_parquet
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.sandbox, pytest.mark.llm, pytest.mark.ray]


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _earlier_run(store, walls: dict[tuple[str | None, str], list[float]]) -> None:
    """An earlier run ``old`` in the store: finished attempts with these wall seconds."""
    rows = []
    for (model, agent), seconds in walls.items():
        for i, wall in enumerate(seconds, 1):
            rows.append(
                {
                    "run_id": "old",
                    "key": f"{agent}-{i}",
                    "agent": agent,
                    "harness": "gold" if model is None else "dataspace-agent",
                    "model": model,
                    "task_id": f"task_{i}",
                    "attempt": 1,
                    "status": "submitted",
                    "wall_seconds": wall,
                }
            )
    # an unfinished attempt has no duration to learn from: it must not count
    rows.append({**rows[0], "key": "lost", "status": "infrastructure_error", "wall_seconds": 1e5})
    folder = store / "runs/old"
    folder.mkdir(parents=True)
    (folder / "results.parquet").write_bytes(rows_to_parquet(rows))


def test_attempts_start_longest_first_from_history_then_paper_capped_at_the_wall_limit(
    tmp_path, ray_dir
):
    """Guards the plan order: history beats the paper, the wall limit caps both, stable ties."""
    release = write_tiny_release(tmp_path / "release", tasks=2)
    store = tmp_path / "store"
    _earlier_run(
        store,
        {
            (None, "gold-slow"): [2000.0, 2500.0, 3000.0],  # capped at the 300 s wall limit
            ("gpt-5.6-sol", "earlier-name"): [100.0, 110.0, 900.0],  # median 110, not paper 49
            (None, "gold-fast"): [2.0, 3.0, 4.0],
        },
    )
    with ScriptedServer({"*": []}) as srv:
        agents = [
            {"name": "gold-fast", "harness": "gold"},
            model_agent(srv.url, name="gpt", model_id="gpt-5.6-sol"),
            model_agent(srv.url, name="kimi", model_id="moonshotai/kimi-k3"),  # paper: 260.1 s
            {"name": "gold-slow", "harness": "gold"},
        ]
        spec = write_spec(
            tmp_path / "s.yaml",
            release,
            store,
            agents,
            concurrency=2,
            limits={"model_turns": 2, "wall_seconds": 300, "command_timeout": 30},
        )
        p = dataspace("run", str(spec), env=cli_env(ray_dir, **{KEY_ENV: SECRET}))
    assert p.returncode == 0, p.stdout + p.stderr
    line = next(x for x in p.stdout.splitlines() if "plan.order" in x)
    assert line == (
        "preflight ok   plan.order: longest first by expected duration: gold-slow 300 s "
        "(median of 3 earlier attempts, capped at the 300 s wall limit), kimi 260 s "
        "(paper mean for Kimi K3), gpt 110 s "
        "(median of 3 earlier attempts), gold-fast 3 s (median of 3 earlier attempts); "
        "first: gold-slow/task_1/1, gold-slow/task_2/1, kimi/task_1/1"
    ), line

    plan = json.loads((store / "runs/r1/order.json").read_text())
    assert plan["order"] == "longest-first"
    assert plan["attempts"] == [
        f"{agent}/task_{t}/1" for agent in ("gold-slow", "kimi", "gpt", "gold-fast") for t in (1, 2)
    ]
    assert plan["expected"]["kimi"] == {
        "seconds": 260.1,
        "source": "paper",
        "detail": "paper mean for Kimi K3",
    }
    assert plan["expected"]["gold-slow"]["seconds"] == 300.0


def test_without_any_figure_the_spec_order_is_kept_and_said(tmp_path, ray_dir):
    """Guards the fallback: nothing known (an empty store, no paper backbone) keeps the order."""
    release = write_tiny_release(tmp_path / "release", tasks=2)
    store = tmp_path / "store"
    agents = [{"name": "gold-b", "harness": "gold"}, {"name": "gold-a", "harness": "gold"}]
    spec = write_spec(tmp_path / "s.yaml", release, store, agents, concurrency=2)
    p = dataspace("run", str(spec), env=cli_env(ray_dir))
    assert p.returncode == 0, p.stdout + p.stderr
    assert (
        "preflight ok   plan.order: spec order: no expected durations (no earlier runs of these "
        "models in the store, no paper figures); first: gold-b/task_1/1, gold-b/task_2/1, "
        "gold-a/task_1/1"
    ) in p.stdout, p.stdout
    plan = json.loads((store / "runs/r1/order.json").read_text())
    assert plan["attempts"] == [
        "gold-b/task_1/1",
        "gold-b/task_2/1",
        "gold-a/task_1/1",
        "gold-a/task_2/1",
    ]
    assert {e["source"] for e in plan["expected"].values()} == {"equal"}
