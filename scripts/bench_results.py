"""Benchmark: writing a run's results table as attempts arrive, and reading it whole.

Writes ``--attempts`` synthetic result rows (default 100,000: 11 agents, 3 attempts) in
arrival order, ``--batch`` rows at a time (the attempts that finish between two status
writes), and prints the time of one write against the number of rows already stored
(median, mean and maximum per tenth of the run, wall-clock and CPU: on a shared machine
the CPU time is the steadier figure), then the reader's time for the whole
table (while the run is going on, and after the final compaction). Every figure is over
``--repeat`` runs; medians are printed.

With ``dataspace.runs.results_log`` (parts) every write is timed. Without it (code before
the parts existed: every write rewrites ``results.parquet`` whole, which is quadratic over a
run), the write is timed at each tenth of the run only, ``--samples`` times.

    .venv/bin/python scripts/bench_results.py [--attempts 100000] [--batch 50]
        [--repeat 3] [--backend file|s3]

``--backend s3`` starts a moto server on 127.0.0.1 (a Python test server: its figures
bound what the client does, not what a real S3 service does).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from dataspace.store import open_store
from dataspace.testing.synthetic import default_agents, synthetic_rows

PREFIX = "runs/bench"
PARTS = importlib.util.find_spec("dataspace.runs.results_log") is not None


def _rows(n: int) -> list[dict[str, Any]]:
    agents = default_agents(11)
    tasks = -(-n // (len(agents) * 3))
    rows, _ = synthetic_rows("bench", agents=agents, tasks=tasks, attempts=3, seed=3)
    for i, r in enumerate(rows):
        r["key"] = f"{i:08x}"
    random.Random(5).shuffle(rows)  # attempts finish in no particular order
    return rows[:n]


@contextlib.contextmanager
def _stores(backend: str) -> Iterator[Any]:
    """Yields a factory of fresh, empty stores on the backend."""
    if backend == "file":
        root = tempfile.mkdtemp(prefix="ds-bench-results-")
        try:
            yield lambda: open_store(os.path.join(root, uuid.uuid4().hex), fsync=False)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    from dataspace.testing import create_bucket, moto_s3_server, s3_test_options

    with moto_s3_server() as endpoint:
        create_bucket(endpoint, "bench")
        yield lambda: open_store(f"s3://bench/{uuid.uuid4().hex}", **s3_test_options(endpoint))


class _Clock:
    """Wall-clock and CPU seconds of a block."""

    def __enter__(self) -> _Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu


def _read(store: Any) -> tuple[float, int]:
    t = time.perf_counter()
    if PARTS:
        from dataspace.runs.results_log import load_results

        df = load_results(store, PREFIX)
    else:
        from dataspace.runs.results import read_results

        df = read_results(store.get_bytes(f"{PREFIX}/results.parquet"))
    return time.perf_counter() - t, len(df)


def _run_parts(store: Any, rows: list[dict[str, Any]], batch: int, tenth: int) -> dict[str, Any]:
    from dataspace.runs.results_log import ResultsLog

    log = ResultsLog(store, PREFIX)
    writes: dict[int, list[tuple[float, float]]] = {}
    for start in range(0, len(rows), batch):
        with _Clock() as c:
            log.append(rows[start : start + batch])
        writes.setdefault(start // tenth, []).append((c.wall, c.cpu))
    live = _read(store)
    t = time.perf_counter()
    log.compact(rows)
    compact = time.perf_counter() - t
    return {"writes": writes, "live": live, "compact": compact, "final": _read(store)}


def _run_whole(
    store: Any, rows: list[dict[str, Any]], batch: int, tenth: int, samples: int
) -> dict[str, Any]:
    from dataspace.runs.results import rows_to_parquet

    writes: dict[int, list[tuple[float, float]]] = {}
    for k in range(len(rows) // tenth):
        upto = rows[: k * tenth + batch]  # the table at the first write of the k-th tenth
        for _ in range(samples):
            with _Clock() as c:
                store.put_bytes(f"{PREFIX}/results.parquet", rows_to_parquet(upto))
            writes.setdefault(k, []).append((c.wall, c.cpu))
    store.put_bytes(f"{PREFIX}/results.parquet", rows_to_parquet(rows))
    return {"writes": writes, "live": _read(store), "compact": 0.0, "final": _read(store)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--attempts", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=50, help="rows per write")
    p.add_argument("--repeat", type=int, default=3, help="runs (medians are printed)")
    p.add_argument("--samples", type=int, default=3, help="writes per tenth (whole rewrites)")
    p.add_argument("--backend", choices=("file", "s3"), default="file")
    args = p.parse_args()
    rows = _rows(args.attempts)
    from dataspace.runs.results import read_results, rows_to_parquet

    read_results(rows_to_parquet(rows[:10]))  # imports pyarrow and pandas before timing
    tenth = max(args.batch, len(rows) // 10)
    mode = "parts (dataspace.runs.results_log)" if PARTS else "whole rewrite of results.parquet"
    print(
        f"{len(rows)} attempts, {args.batch} a write, {args.backend} store, {mode}, "
        f"{args.repeat} run(s); load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    runs = []
    with _stores(args.backend) as fresh:
        for _ in range(max(1, args.repeat)):
            store = fresh()
            if PARTS:
                runs.append(_run_parts(store, rows, args.batch, tenth))
            else:
                runs.append(_run_whole(store, rows, args.batch, tenth, args.samples))
            store.close()
    print(
        f"{'stored rows':>17}  {'writes':>6}  {'wall ms: median':>15}  {'mean':>7}  {'max':>7}"
        f"  {'CPU ms: median':>14}  {'mean':>7}"
    )
    for k in sorted(runs[0]["writes"]):
        each = [w for r in runs for w, _ in r["writes"].get(k, [])]

        def med(i: int, how: Any, k: int = k) -> float:
            return 1e3 * statistics.median(how([x[i] for x in r["writes"][k]]) for r in runs)

        lo, hi = k * tenth, min(len(rows), (k + 1) * tenth)
        print(
            f"{lo:>8}-{hi:<8}  {len(each) // len(runs):>6}  {med(0, statistics.median):>15.2f}"
            f"  {med(0, statistics.fmean):>7.2f}  {max(each) * 1e3:>7.1f}"
            f"  {med(1, statistics.median):>14.2f}  {med(1, statistics.fmean):>7.2f}"
        )
    total = statistics.median(sum(w for v in r["writes"].values() for w, _ in v) for r in runs)
    if PARTS:
        print(f"all writes of a run: median {total:.2f} s")
        print(f"final compaction: median {statistics.median(r['compact'] for r in runs):.2f} s")
    for label, name in (("before compaction", "live"), ("after compaction", "final")):
        secs = statistics.median(r[name][0] for r in runs)
        print(f"read the whole table {label}: median {secs:.3f} s ({runs[0][name][1]} rows)")


if __name__ == "__main__":
    main()
