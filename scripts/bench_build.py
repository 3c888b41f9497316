"""Benchmark: items built per second for the bundled corpora (every stage, in process).

Usage: python scripts/bench_build.py [--repeat N] [--seed S] [--no-stage3]

Builds the bundled release (both corpora) N times into a temporary folder, each from an
empty item cache, and prints the throughput and the time spent per stage.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-stage3", action="store_true", help="structured renderers only")
    args = parser.parse_args()

    import dataclasses

    from builder.driver import build_release, bundled_spec
    from builder.spec import load_items

    spec = bundled_spec(seed=args.seed)
    if args.no_stage3:
        spec = dataclasses.replace(spec, stage3=None)
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        started = time.perf_counter()
        items, *_ = load_items(spec)
        print(
            f"first load (creates the bundled databases): "
            f"{time.perf_counter() - started:.3f}s, {len(items)} items"
        )
        rates, reports = [], []
        for n in range(args.repeat):
            run = Path(tmp) / f"run{n}"
            report = build_release(spec, run / "release", workers=0, cache_dir=run / "cache")
            rates.append(report.items_per_minute / 60)
            reports.append(report)
        last = reports[-1]
        print(
            f"tasks: {len(last.accepted)} accepted, {len(last.rejected)} rejected, "
            f"{len(last.skipped)} skipped"
        )
        print(
            f"items built per second: median {statistics.median(rates):.1f} "
            f"(runs: {', '.join(f'{r:.1f}' for r in rates)})"
        )
        print(f"wall seconds per build: {statistics.median(r.wall_seconds for r in reports):.3f}")
        print("seconds per stage (last run):")
        for stage, seconds in sorted(last.timings.items(), key=lambda kv: -kv[1]):
            print(f"  {stage:<24} {seconds:8.3f}")
        size = sum(
            p.stat().st_size
            for p in (Path(tmp) / f"run{args.repeat - 1}").rglob("*")
            if p.is_file()
        )
        print(f"release size: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
