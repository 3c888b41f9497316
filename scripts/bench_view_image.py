"""Benchmark of view_image's image path: the bounded child decoder against decoding in place.

Prints the median and p90 seconds of ``normalize_image`` (header check, then decoding in a
memory-limited child process) and of the same re-encoding done in this process, for a
legitimate 2400 x 1200 PNG, and the time to refuse a 19,999 x 19,999 decompression bomb
from its header, with this process's peak memory before and after.

Usage: ``python scripts/bench_view_image.py [--runs 9]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _in_process(data: bytes) -> bytes:
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as opened:
        image = ImageOps.exif_transpose(opened).convert("RGB")
        image.thumbnail((1600, 1600), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=90, optimize=True)
    return out.getvalue()


def _stats(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):.3f} s, p90 {p90:.3f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "agents"))
    from test_agents_hardening import png

    from dataspace.agents._image import ImageRefused, normalize_image

    chart = (ROOT / "tests/fixtures/protocol/official/workspace/chart.png").read_bytes()
    child, here = [], []
    for _ in range(args.runs):
        t = time.perf_counter()
        encoded, _ = normalize_image(chart, max_edge=1600, quality=90)
        child.append(time.perf_counter() - t)
        t = time.perf_counter()
        same = _in_process(chart)
        here.append(time.perf_counter() - t)
        assert encoded == same  # the child produces the very same JPEG bytes
    print(f"2400x1200 PNG, bounded child decoder: {_stats(child)}")
    print(f"2400x1200 PNG, decoded in process:    {_stats(here)}")
    bomb = png(19_999, 19_999)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    refusals = []
    for _ in range(args.runs):
        t = time.perf_counter()
        with contextlib.suppress(ImageRefused):
            normalize_image(bomb, max_edge=1600, quality=90)
        refusals.append(time.perf_counter() - t)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"19999x19999 PNG ({len(bomb)} bytes) refused from its header: {_stats(refusals)}")
    print(f"peak RSS of this process: {before / 1024:.0f} MiB before, {after / 1024:.0f} MiB after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
