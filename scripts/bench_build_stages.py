"""Benchmark of the parallel build (stages 1 and 2 plus the pipeline) on the EHRSQL MIMIC demo.

Builds all 365 items of ``../shared/sources/ehrsql_mimic3_demo`` with 1 and with 2 Ray
workers (a fresh cache each time, so every item is really built), and prints items per
minute, where the time goes by stage, how many items became tasks and why the others did
not. With ``--gold`` it then runs the ``gold`` agent over the release (local sandboxes,
Ray) and prints its accuracy, which must be 100%.

    .venv/bin/python scripts/bench_build_stages.py [--workers 1 2] [--limit N] [--gold]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO.parent / "shared" / "sources" / "ehrsql_mimic3_demo" / "ehrsql_mimic3_demo.jsonl"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--limit", type=int, help="only the first N items")
    p.add_argument("--gold", action="store_true", help="run the gold agent on the release")
    p.add_argument("--keep", help="keep the last release and report in this folder")
    args = p.parse_args()
    if not SOURCE.is_file():
        print(f"skipped: {SOURCE} is absent", file=sys.stderr)
        return 0

    from builder.driver import build_release
    from builder.spec import BuildSpec, SourceSpec

    spec = BuildSpec(
        sources=(SourceSpec(kind="ehrsql-jsonl", path=str(SOURCE), limit=args.limit),), seed=0
    )
    work = Path(tempfile.mkdtemp(prefix="bench-build-"))
    last = None
    try:
        for workers in args.workers:
            out = work / f"w{workers}"
            t0 = time.perf_counter()
            report = build_release(spec, out / "release", workers=workers, cache_dir=out / "cache")
            wall = time.perf_counter() - t0
            data = report.to_json()
            n = data["counts"]["accepted"] + data["counts"]["rejected"]
            print(
                f"\n== {workers} Ray worker(s): {n} items in {wall:.1f} s = "
                f"{60 * n / wall:.1f} items/min "
                f"({data['counts']['accepted']} tasks, {data['counts']['rejected']} "
                "rejected)"
            )
            busy = sum(v for k, v in data["timings"].items() if k not in ("load", "write"))
            print("   stage        seconds (summed over items)   share")
            for stage, secs in sorted(data["timings"].items(), key=lambda kv: -kv[1]):
                share = f"{100 * secs / busy:5.1f}%" if stage not in ("load", "write") else ""
                print(f"   {stage:<12} {secs:10.2f}                    {share}")
            print(
                f"   item build time summed: {busy:.1f} s; wall: {wall:.1f} s "
                f"(Ray start, scheduling and release writing make the difference)"
            )
            _substages(out / "release")
            print("   languages of the tasks:", json.dumps(data["languages"]))
            print("   rejections by stage:")
            for stage, reasons in data["rejections_by_stage"].items():
                for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
                    print(f"     {stage}: {count} x {reason}")
            last = out
        if args.gold and last is not None:
            _gold(last)
        if args.keep and last is not None:
            dest = Path(args.keep)
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copytree(last / "release", dest / "release", dirs_exist_ok=True)
            shutil.copy(last / "build_report.json", dest / "build_report.json")
            print(f"kept the release and report in {dest}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _substages(release_dir: Path) -> None:
    """Inside stages 1 and 2, from the tasks' ledgers (seconds summed over tasks)."""
    from dataspace.release import Release

    release = Release(release_dir)
    sums: dict[str, float] = {}
    for task_id in release.task_ids():
        ledger = release.ledger(task_id) or {}
        for k, v in (ledger.get("transform", {}).get("timings") or {}).items():
            if k != "total_s":
                sums[f"transform.{k[:-2]}"] = sums.get(f"transform.{k[:-2]}", 0.0) + v
        for k, v in (ledger.get("sampling", {}).get("timings") or {}).items():
            if k != "total_s":
                sums[f"sample.{k[:-2]}"] = sums.get(f"sample.{k[:-2]}", 0.0) + v
    print("   inside the stages (from the ledgers):")
    for k, v in sorted(sums.items()):
        print(f"     {k:<22} {v:8.2f} s")


def _gold(out: Path) -> None:
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    spec = RunSpec(
        run_id="bench-gold",
        release=str(out / "release"),
        store=f"file://{out / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(memory_bytes=1024**3),
        sandbox=SandboxConfig(),
        concurrency=2,
    )
    t0 = time.perf_counter()
    outcome = execute_run(spec)
    gold = outcome.summary["agents"]["gold"]
    print(
        f"\n== gold agent on the release: accuracy {100 * (gold['accuracy'] or 0):.2f}% "
        f"({gold['passed']}/{gold['scored']}) in {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
