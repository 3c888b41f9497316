"""Benchmark: the full report of a large synthetic run, with and without trace pages.

Default size: 410 tasks x 11 agents x 3 attempts (13,530 attempts), each attempt with its
event log, run.json and result.json in a local store. Prints the time of:

- a report without trace pages (tables, figures, HTML, Markdown, CSV/Parquet);
- a cold report that also writes a trace page for every attempt;
- the same report rebuilt (the existing trace pages are checked by their content key and
  kept: the report at the end of a run whose controller wrote each page as its attempt
  finished);
- one attempt's page as the run controller writes it when the attempt finishes (median
  over ``--pages`` attempts).

Each is run ``--repeat`` times; the medians of wall-clock time and of CPU time (this
process and its workers, and this process's alone, which on an idle machine is about
the wall time when the workers keep up; on a shared machine the CPU time is the steadier
figure) are printed, with the load average.

    .venv/bin/python scripts/bench_report.py [--tasks 410] [--agents 11] [--attempts 3]
        [--repeat 3] [--pages 200] [--store DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from dataspace.report import build_report
from dataspace.report.load import OutFolder, RunSource
from dataspace.report.tracepages import write_attempt_page
from dataspace.runs.results import read_rows
from dataspace.store import open_store
from dataspace.testing.synthetic import default_agents, write_synthetic_run


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the page workers)."""
    return _own_cpu_seconds() + _children_cpu_seconds()


def _own_cpu_seconds() -> float:
    """CPU time of this process alone (on an idle machine, about its share of the wall)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def _children_cpu_seconds() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=410)
    p.add_argument("--agents", type=int, default=11)
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3, help="runs of each report (medians)")
    p.add_argument("--pages", type=int, default=200, help="pages written as at finish")
    p.add_argument("--store", help="reuse (or create) the synthetic run in this folder")
    args = p.parse_args()
    root = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="ds-bench-report-"))
    try:
        run = root / "runs" / "bench"
        if not (run / "results.parquet").is_file():
            store = open_store(str(root), fsync=False)
            t = time.perf_counter()
            rows = write_synthetic_run(
                store,
                "bench",
                agents=default_agents(args.agents),
                tasks=args.tasks,
                attempts=args.attempts,
                seed=7,
            )
            print(
                f"synthetic run: {len(rows)} attempts written in "
                f"{time.perf_counter() - t:.1f} s ({_size_mb(run):.0f} MB)"
            )
        for label, out, traces in (
            ("without trace pages", "out-none", "none"),
            ("with trace pages, cold", "out-traces", "all"),
            ("with trace pages, rebuilt", "out-traces", "new"),
        ):
            walls, cpus, owns, loads = [], [], [], []
            for _ in range(max(1, args.repeat)):
                if traces == "all":
                    shutil.rmtree(root / out, ignore_errors=True)
                loads.append(os.getloadavg()[0])
                c0, o0 = _cpu_seconds(), _own_cpu_seconds()
                t = time.perf_counter()
                res = build_report([str(run)], out=str(root / out), traces=traces)
                walls.append(time.perf_counter() - t)
                cpus.append(_cpu_seconds() - c0)
                owns.append(_own_cpu_seconds() - o0)
            html = (root / out / "report.html").stat().st_size / 1e6
            print(
                f"report {label}: median {statistics.median(walls):.2f} s wall, "
                f"{statistics.median(cpus):.2f} s CPU ({statistics.median(owns):.2f} s of it in "
                f"this process) over {len(walls)} run(s) "
                f"(wall {', '.join(f'{w:.2f}' for w in walls)}; load average "
                f"{', '.join(f'{x:.1f}' for x in loads)}; {res.traces} trace pages written, "
                f"{res.traces_kept} kept; report.html {html:.2f} MB; {len(res.tables)} "
                f"tables, {len(res.figures)} figures; output {_size_mb(root / out):.0f} MB)",
                flush=True,
            )
        rows = read_rows((run / "results.parquet").read_bytes())
        source = RunSource(store=open_store(str(run)))
        shutil.rmtree(root / "out-finish", ignore_errors=True)  # written, not kept
        at_finish = OutFolder(store=open_store(str(root / "out-finish"), fsync=False))
        times = []
        for row in rows[:: max(1, len(rows) // max(1, args.pages))][: args.pages]:
            t = time.perf_counter()
            write_attempt_page(source, at_finish, row.to_dict(), report_key="report.html")
            times.append(time.perf_counter() - t)
        if times:
            print(
                f"a page written as its attempt finishes: median "
                f"{statistics.median(times) * 1000:.1f} ms over {len(times)} attempts",
                flush=True,
            )
    finally:
        if not args.store:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
