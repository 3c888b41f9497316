"""Where the plan order learns durations: every run's results table in the store, any store."""

from __future__ import annotations

import pytest

from dataspace.runs.expected import history_seconds
from dataspace.runs.results import rows_to_parquet
from dataspace.store import open_store


def _row(run: str, agent: str, model: str | None, status: str, wall: float) -> dict:
    return {
        "run_id": run,
        "key": f"{run}-{agent}-{wall}",
        "agent": agent,
        "harness": "gold",
        "model": model,
        "task_id": "task_1",
        "attempt": 1,
        "status": status,
        "wall_seconds": wall,
    }


@pytest.mark.parametrize("uri", ["memory://history", "file"])
def test_history_reads_each_runs_table_and_only_finished_attempts(tmp_path, uri):
    """Guards the listing: run tables only (not a rescore's copy), agent outcomes only."""
    store = open_store(str(tmp_path / "store") if uri == "file" else uri)
    store.put_bytes(
        "runs/a/results.parquet",
        rows_to_parquet(
            [
                _row("a", "x", "m1", "submitted", 10.0),
                _row("a", "gold", None, "wall_time_exhausted", 1800.0),
                _row("a", "x", "m1", "infrastructure_error", 999.0),
                _row("a", "x", "m1", "skipped", 999.0),
            ]
        ),
    )
    store.put_bytes(
        "runs/b/results.parquet", rows_to_parquet([_row("b", "y", "m1", "submitted", 30.0)])
    )
    # a rescore of run b holds the same attempts again: counting it would count them twice
    store.put_bytes(
        "runs/b/rescore-1/results.parquet",
        rows_to_parquet([_row("b", "y", "m1", "submitted", 30.0)]),
    )
    store.put_bytes("runs/b/attempts/y/task_1/1/result.json", b"{}")
    assert history_seconds(store) == {"model:m1": [10.0, 30.0], "agent:gold": [1800.0]}
