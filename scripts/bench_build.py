"""Benchmark: items built per second for the bundled corpora.

Usage: python scripts/bench_build.py [--repeat N] [--seed S]

Builds the bundled release (both corpora) N times into a temporary folder and prints the
throughput and the time spent per stage.
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
    args = parser.parse_args()

    from builder.pipeline import build_release, load_bundled_items

    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        cache = Path(tmp) / "cache"
        started = time.perf_counter()
        items = load_bundled_items(cache_dir=cache)
        print(
            f"first load (creates the bundled databases): "
            f"{time.perf_counter() - started:.3f}s, {len(items)} items"
        )
        rates, reports = [], []
        for n in range(args.repeat):
            items = load_bundled_items(cache_dir=cache)
            report = build_release(items, Path(tmp) / f"run{n}" / "release", seed=args.seed)
            rates.append(report.items_per_second)
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
            print(f"  {stage:<9} {seconds:8.3f}")
        size = sum(
            p.stat().st_size
            for p in (Path(tmp) / f"run{args.repeat - 1}").rglob("*")
            if p.is_file()
        )
        print(f"release size: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
