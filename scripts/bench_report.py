"""Benchmark: the full report of a large synthetic run, with and without trace pages.

Default size: 410 tasks x 11 agents x 3 attempts (13,530 attempts), each attempt with its
event log, run.json and result.json in a local store. Prints the time of:

- a report without trace pages (tables, figures, HTML, Markdown, CSV/Parquet);
- a cold report that also writes a trace page for every attempt;
- the same report rebuilt (the existing trace pages are kept).

    .venv/bin/python scripts/bench_report.py [--tasks 410] [--agents 11] [--attempts 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from dataspace.report import build_report
from dataspace.store import open_store
from dataspace.testing.synthetic import default_agents, write_synthetic_run


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=410)
    p.add_argument("--agents", type=int, default=11)
    p.add_argument("--attempts", type=int, default=3)
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
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"cpus: {os.cpu_count()}, load average before: {load:.2f}")
        for label, out, traces in (
            ("without trace pages", "out-none", "none"),
            ("with trace pages, cold", "out-traces", "all"),
            ("with trace pages, rebuilt", "out-traces", "new"),
        ):
            t = time.perf_counter()
            res = build_report([str(run)], out=str(root / out), traces=traces)
            dt = time.perf_counter() - t
            html = (root / out / "report.html").stat().st_size / 1e6
            print(
                f"report {label}: {dt:.2f} s ({res.traces} trace pages written, "
                f"{res.traces_kept} kept; report.html {html:.2f} MB; {len(res.tables)} "
                f"tables, {len(res.figures)} figures; output {_size_mb(root / out):.0f} MB)"
            )
    finally:
        if not args.store:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
