"""The results table written in parts: one row a key at any time, on a folder and on S3."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from results_log_writer import PREFIX, batches, latest, row

from dataspace.errors import NotFoundError
from dataspace.runs.results_log import ResultsLog, load_results, read_results_table
from dataspace.store import open_store

WRITER = Path(__file__).with_name("results_log_writer.py")
ROOT = Path(__file__).resolve().parents[2]  # the child imports the code under test
BUCKET = "results-log"
WRITTEN_BEFORE_KILL = {"part": 2, "merge": 4, "compact": 5}


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    pytest.importorskip("moto.server", reason="moto[server] is not installed")
    from dataspace.testing import create_bucket, moto_s3_server

    with moto_s3_server() as endpoint:
        create_bucket(endpoint, BUCKET)
        yield endpoint


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.s3)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, dict[str, Any]]:
    """(store URI, endpoint or "-", options) of a fresh store on each backend."""
    if request.param == "file":
        return str(tmp_path / "store"), "-", {}
    from dataspace.testing import s3_test_options

    endpoint = request.getfixturevalue("moto_endpoint")
    return f"s3://{BUCKET}/{uuid.uuid4().hex}", endpoint, s3_test_options(endpoint)


def _statuses(store: Any) -> dict[str, str]:
    table = read_results_table(store, PREFIX)
    keys = table.column("key").to_pylist()
    assert len(keys) == len(set(keys)), f"a row counted twice: {sorted(keys)}"
    return dict(zip(keys, table.column("status").to_pylist(), strict=True))


@pytest.mark.parametrize("scenario", sorted(WRITTEN_BEFORE_KILL))
def test_a_writer_killed_between_two_writes_loses_and_double_counts_nothing(where, scenario):
    """Guards the parts' crash safety: SIGKILL after a part, a merged part or the base is
    written and before what it replaces is deleted; a resumed writer then finishes."""
    uri, endpoint, options = where
    done = subprocess.run(
        [sys.executable, str(WRITER), uri, endpoint, scenario],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(WRITER.parent)])},
    )
    assert done.returncode == -9, done.stdout + done.stderr
    store = open_store(uri, **options)
    all_batches = batches()
    before = all_batches[: WRITTEN_BEFORE_KILL[scenario]]
    assert _statuses(store) == {k: r["status"] for k, r in latest(before).items()}
    if len(before) > 2:
        assert _statuses(store)["k000"] == "wrong_answer"  # the retry's row won

    log = ResultsLog(store, PREFIX, fanout=2)  # the run resumed
    for b in all_batches[len(before) :]:
        log.append(b)
    want = {k: r["status"] for k, r in latest(all_batches).items()}
    assert _statuses(store) == want
    log.compact(list(latest(all_batches).values()))
    assert _statuses(store) == want
    assert not list(store.list(f"{PREFIX}/results/"))
    assert len(load_results(store, PREFIX)) == len(want)


def test_rows_keep_their_place_and_the_latest_version_wins(tmp_path):
    """Guards the table's order: a row written again keeps the place of its first write."""
    store = open_store(str(tmp_path))
    log = ResultsLog(store, "runs/x", fanout=3)
    log.compact([row(i, "not_scheduled") for i in range(5)])
    log.append([row(3)])
    log.append([row(1, "wrong_answer"), row(7)])
    table = read_results_table(store, "runs/x")
    assert table.column("key").to_pylist() == ["k000", "k001", "k002", "k003", "k004", "k007"]
    assert table.column("status").to_pylist() == [
        "not_scheduled",
        "wrong_answer",
        "not_scheduled",
        "submitted",
        "not_scheduled",
        "submitted",
    ]


def test_parts_stay_few_and_a_run_without_results_says_so(tmp_path):
    """Guards the merging: parts stay O(fanout x log n) however many writes there were."""
    store = open_store(str(tmp_path))
    with pytest.raises(NotFoundError, match=r"runs/none/results\.parquet"):
        read_results_table(store, "runs/none")
    log = ResultsLog(store, "runs/x", fanout=4)
    for i in range(300):
        log.append([row(i)])
    parts = list(store.list("runs/x/results/"))
    assert len(parts) <= 4 * 5
    assert read_results_table(store, "runs/x").num_rows == 300
