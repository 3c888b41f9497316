"""Benchmark: how long a local Ray instance takes to start, lean and with Ray's full set.

Each try is a fresh process that calls ``connect_ray`` the way ``dataspace run`` does (a
local instance of ``--cpus`` CPUs in a temporary folder), runs one task, and disconnects.
It prints, per variant, the median over ``--repeat`` tries of:

- start: from the call until ``connect_ray`` returns (the instance is up and joined);
- first task: the first task's round trip (Ray starts a worker for it);
- stop: disconnecting and stopping the instance;
- CPU: the CPU time of the try's process and of every process of its instance (GCS,
  raylet, agents, workers), read from ``/proc`` just before the stop: a process the
  raylet started and the stop kills is never waited for, so ``RUSAGE_CHILDREN`` misses it.

``lean`` is what ``connect_ray`` starts (``ray_start.LEAN_HEAD_SKIPS``: no API server,
autoscaler or log monitor; ``LEAN_AGENT``: stubs in place of the dashboard agent and of the
runtime-env agent);
``minimal`` is the same with Ray's minimal dashboard agent; ``full`` is the same call with
nothing skipped and the full agent, as a plain ``ray.init()`` would start. The variants
alternate, so all see the same load.

    .venv/bin/python scripts/bench_ray_start.py [--repeat 5] [--cpus 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

_TRY = """
import json, os, sys, time
import ray
from dataspace.runs import ray_start
if sys.argv[1] != "lean":
    ray_start.LEAN_AGENT = sys.argv[1]
if sys.argv[1] == "full":
    ray_start.LEAN_HEAD_SKIPS = ()
t1 = time.monotonic()
ray_start.connect_ray(num_cpus=int(sys.argv[2]))
t2 = time.monotonic()
ray.get(ray.remote(num_cpus=0.1)(lambda: os.getpid()).remote(), timeout=300)
t3 = time.monotonic()
head = ray_start._head.proc.pid
tick = os.sysconf("SC_CLK_TCK")
cpu = 0.0
for pid in (os.getpid(), head, *ray_start._descendants(head)):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:
        continue
    cpu += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
ray_start._stop_head(ray_start._head)
t4 = time.monotonic()
print(json.dumps({"start": t2 - t1, "first task": t3 - t2, "stop": t4 - t3, "CPU": cpu}))
"""


def _one(variant: str, cpus: int) -> dict[str, float]:
    ray_dir = tempfile.mkdtemp(prefix="dsr-", dir="/tmp")  # Ray's socket paths stay short
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = ray_dir
    try:
        p = subprocess.run(
            [sys.executable, "-c", _TRY, variant, str(cpus)],
            capture_output=True, text=True, env=env, timeout=600,
        )  # fmt: skip
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit(f"{variant} try failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpus", type=int, default=2)
    args = ap.parse_args()
    figures: dict[str, list[dict[str, float]]] = {"lean": [], "minimal": [], "full": []}
    for _ in range(args.repeat):
        for variant in figures:
            figures[variant].append(_one(variant, args.cpus))
    load = os.getloadavg()[0]
    print(f"local Ray start-up, {args.cpus} CPUs, medians of {args.repeat} (load now {load:.1f})")
    keys = ["start", "first task", "stop", "CPU"]
    print(f"{'':8}" + "".join(f"{k:>12}" for k in keys))
    for variant, runs in figures.items():
        cells = "".join(f"{statistics.median(r[k] for r in runs):>11.2f}s" for k in keys)
        print(f"{variant:8}{cells}")


if __name__ == "__main__":
    main()
