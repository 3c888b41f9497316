"""Benchmark the demo: wall time of `dataspace demo` from scratch, and controller memory.

Prints the median and every run's wall time (build + run + score + report, a fresh output
folder each time), then the memory of the controller during a run: the driver's peak RSS
and the peak RSS of each Ray worker executing an attempt (what one in-flight attempt costs
on the controller side; the sandboxed commands themselves are not counted).

    .venv/bin/python scripts/bench_demo.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _workers() -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "cmdline").read_bytes().startswith(b"ray::run_attempt"):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    times = []
    peak_driver = 0
    worker_peaks: dict[int, int] = {}
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-m", "dataspace.cli", "demo", "--out", str(Path(tmp) / "demo")],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            stop = threading.Event()

            def sample(pid: int = proc.pid, stop: threading.Event = stop) -> None:
                nonlocal peak_driver
                while not stop.is_set():
                    peak_driver = max(peak_driver, _rss_kib(pid))
                    for w in _workers():
                        worker_peaks[w] = max(worker_peaks.get(w, 0), _rss_kib(w))
                    time.sleep(0.05)

            th = threading.Thread(target=sample, daemon=True)
            th.start()
            out = proc.communicate()[0].decode()
            stop.set()
            th.join()
            dt = time.monotonic() - t0
            if proc.returncode != 0:
                print(out)
                raise SystemExit(f"demo run {i + 1} failed")
            times.append(dt)
            print(f"run {i + 1}: {dt:.1f} s")
    print(
        f"demo wall time: median {statistics.median(times):.1f} s over {len(times)} runs "
        f"(min {min(times):.1f}, max {max(times):.1f})"
    )
    print(f"driver peak RSS: {peak_driver / 1024:.0f} MiB")
    if worker_peaks:
        vals = sorted(worker_peaks.values())
        print(
            f"Ray worker (one in-flight attempt) peak RSS: median "
            f"{statistics.median(vals) / 1024:.0f} MiB, max {vals[-1] / 1024:.0f} MiB "
            f"over {len(vals)} workers"
        )


if __name__ == "__main__":
    main()
