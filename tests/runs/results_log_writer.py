"""A results writer that kills itself (SIGKILL) right after one chosen store write.

Run as ``python results_log_writer.py STORE_URI ENDPOINT|- SCENARIO``: it appends the
batches of :func:`batches` to the run ``runs/r`` (two rows each, ``fanout=2``) and dies
after the write ``SCENARIO`` names, before whatever would follow it:

- ``part``: the second part (its merge with the first not yet written);
- ``merge``: the first merged part of four batches (the parts it covers not yet deleted);
- ``compact``: the whole table after five batches (the parts not yet deleted).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from dataspace.runs.results_log import PartName, ResultsLog
from dataspace.store import open_store

PREFIX = "runs/r"


def row(i: int, status: str = "submitted") -> dict[str, Any]:
    """One attempt's row (the identity columns and a status)."""
    return {
        "run_id": "r",
        "key": f"k{i:03d}",
        "agent": "a",
        "harness": "h",
        "task_id": f"task_{i}",
        "attempt": 1,
        "status": status,
    }


def batches(n: int = 12) -> list[list[dict[str, Any]]]:
    """Batch ``b`` holds attempts 2b and 2b+1; batch 2 writes attempt 0 again (a retry)."""
    out = [[row(2 * b), row(2 * b + 1)] for b in range(n)]
    out[2] = [row(4), row(0, "wrong_answer")]
    out[2].append(row(5))
    return out


def latest(written: list[list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Key -> the latest version of each row written."""
    return {r["key"]: r for b in written for r in b}


class _KillAfter:
    """The real store, and SIGKILL to this process right after the chosen write."""

    def __init__(self, store: Any, scenario: str) -> None:
        self._store = store
        self._scenario = scenario
        self._parts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def put_bytes(self, key: str, data: bytes, *, overwrite: bool = True) -> None:
        self._store.put_bytes(key, data, overwrite=overwrite)
        part = PartName.parse(key)
        if part is not None:
            self._parts += 1
        die = (
            (self._scenario == "part" and self._parts == 2)
            or (self._scenario == "merge" and part is not None and part.last - part.first >= 7)
            or (self._scenario == "compact" and key.endswith("/results.parquet"))
        )
        if die:
            os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    uri, endpoint, scenario = sys.argv[1:4]
    options: dict[str, Any] = {}
    if endpoint != "-":
        from dataspace.testing import s3_test_options

        options = s3_test_options(endpoint)
    store = _KillAfter(open_store(uri, **options), scenario)
    log = ResultsLog(store, PREFIX, fanout=2)
    written: list[list[dict[str, Any]]] = []
    for b in batches():
        if scenario == "compact" and len(written) == 5:
            log.compact(list(latest(written).values()))
        log.append(b)
        written.append(b)
    raise SystemExit(f"{scenario}: never killed")


if __name__ == "__main__":
    main()
