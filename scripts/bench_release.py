"""Benchmark release validation on the official shape: 410 task inputs, gold and configs for 60.

Writes a release in the official layout (``dataspace.testing.releases.write_official_release``)
and times ``Release.check()`` (every task.json and workspace, every config and gold file) and
``Release.fingerprint()`` over several runs; prints the median and the slowest.

Usage: python scripts/bench_release.py [--tasks 410] [--scored 60] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from dataspace.release import Release
from dataspace.testing.releases import write_official_release


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=410)
    ap.add_argument("--scored", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    scored = tuple(sorted(random.Random(0).sample(range(1, args.tasks + 1), args.scored)))
    with tempfile.TemporaryDirectory(prefix="bench-release-") as tmp:
        root = write_official_release(Path(tmp) / "rel", tasks=args.tasks, scored=scored)
        for name, fn in (
            ("check", lambda: Release(root).check()),
            ("fingerprint", lambda: Release(root).fingerprint()),
        ):
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            print(
                f"{name:12s} {args.tasks} tasks ({args.scored} scored): median "
                f"{1000 * statistics.median(times):.1f} ms, max {1000 * max(times):.1f} ms "
                f"over {args.repeat} runs"
            )
        print(f"counts: {Release(root).check().describe()}")


if __name__ == "__main__":
    main()
