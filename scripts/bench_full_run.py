"""Benchmark a full run on this machine: 410 tasks x 6 scripted backbones, 16 at a time.

A release in the official layout (``write_official_release``: 410 tasks, about 60 of them
scored) is run by DataSpace-Agent, the real model loop, against six scripted backbones,
each the project's scripted model server on loopback in a process of its own. Each
attempt's model time is drawn from its backbone's latency distribution in the paper
(``scripts/simulate_cluster.py``'s own draw: a Weibull fitted to the mean and P90, capped
at the 1,800 s wall clock), divided by ``--scale`` (200) and split evenly over the
attempt's model turns (look at the workspace, write the answer, submit it). The run goes
through the normal path, ``dataspace run SPEC`` in a process of its own, with real Ray
(the local instance it starts) and real local sandboxes, ``--concurrency`` agents at once.

Printed per run:

* the makespan (first attempt's start to last attempt's end, from the attempts' own
  ``run.json``) and the command's wall time (Ray's start, preflight and the final write
  included), against the ideal for the same drawn latencies at the same concurrency
  (``simulate_cluster.simulate`` with no start-up or teardown: the larger of the summed
  latency over the slots and the longest attempt), and the makespan that simulation gives
  in the controller's order with no overhead at all;
* the controller's overhead per attempt: CPU seconds of the controller (the ``dataspace
  run`` process and its Ray workers, which run the attempts' agent loops) and of Ray's own
  processes, divided by the attempts; and wall seconds per attempt beyond its scripted
  model time (median, mean, P90), split into the model calls' HTTP overhead and the rest
  (sandbox, tools, scoring, upload);
* memory: the peak resident set of the controller process, of all Ray workers together
  (and per worker), and of Ray's own processes.

CPU and memory come from sampling the run's process tree twice a second (``/proc``); the
sandboxes' commands are what the Ray workers reaped (their children's CPU). With
``--repeat`` the run is repeated on fresh stores (the same draws) and the medians are
printed last.

Usage: python scripts/bench_full_run.py [--tasks 410] [--backbones 6] [--concurrency 16]
       [--scale 200] [--repeat 1] [--seed 0] [--quick] [--json FILE] [--keep DIR]
``--quick``: 12 tasks x 2 backbones at 4-way.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from dataspace.runs.results import read_results
from dataspace.testing.releases import write_official_release

HERE = Path(__file__).resolve().parent
KEY_ENV = "BENCH_FULL_RUN_KEY"
RUN_ID = "full"
TURNS = 3  # model turns per attempt: look, answer, submit
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _script_module(name: str) -> Any:
    """A sibling script as a module (``scripts/`` is not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sim = _script_module("simulate_cluster")
bench_agent = _script_module("bench_agent")


# ---- the workload ------------------------------------------------------------------------


def slug(backbone: str) -> str:
    """A model id and agent name for a paper backbone (``Grok 4.5`` -> ``grok-4.5``).

    The controller's plan order recognises it as the paper's backbone.
    """
    return re.sub(r"[^a-z0-9.]+", "-", backbone.lower()).strip("-")


def draw(tasks: int, backbones: int, seed: int, scale: float) -> list[Any]:
    """The simulator's attempts (same seed, same draws) for these tasks and backbones.

    Latencies are divided by ``scale``; start-up and workspace are zero (they are not the
    scripted run's: its sandboxes start for real).
    """
    if not 1 <= tasks <= sim.TASKS:
        raise SystemExit(f"--tasks: between 1 and {sim.TASKS}, got {tasks}")
    names = list(sim.BACKBONES)[:backbones]
    attempts = sim.draw_attempts(random.Random(seed), sim.Scenario())
    return [
        dataclasses.replace(a, latency=a.latency / scale, startup=0.0, workspace=0.0)
        for a in attempts
        if a.task < tasks and a.backbone in names
    ]


def ideal(attempts: list[Any], concurrency: int) -> tuple[float, float]:
    """(the ideal makespan, the controller's order simulated with no overhead)."""
    sc = sim.Scenario(slots=concurrency, max_pending=concurrency, teardown=0.0, staging="shared")
    out = sim.simulate(sim.longest_first(attempts, sim.EXPECTED), sc)
    return out.ideal, out.makespan


def scripts_for(attempts: list[Any], backbone: str) -> dict[str, list[dict]]:
    """The scripted replies of one backbone: per task, three turns sharing its latency."""
    out = {}
    for a in attempts:
        if a.backbone != backbone:
            continue
        k = a.task + 1
        delay = a.latency / TURNS
        # the release's task k asks for the products sold more than 5 + 3k units
        answer = (
            'awk -F, \'NR==1{print "product,units"} NR>1 && $3>'
            f"{5 + 3 * k}"
            '{print $1","$3}\' /workspace/sales.csv > /output/prediction.csv'
        )
        out[f"task_{k}"] = [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "ls /workspace"}}]},
            {"tool_calls": [{"name": "bash", "arguments": {"command": answer}}]},
            {
                "tool_calls": [
                    {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}
                ]
            },
        ]
        for step in out[f"task_{k}"]:
            step["delay"] = delay
    return out


def scored_tasks(tasks: int) -> tuple[int, ...]:
    """About 60 of 410 tasks scored, spread evenly, as in the official release."""
    want = max(1, round(tasks * 60 / 410))
    return tuple(sorted({1 + i * tasks // want for i in range(want)}))


def write_spec(
    path: Path, release: Path, store: Path, urls: dict[str, str], concurrency: int
) -> Path:
    agents = [
        {
            "name": slug(b),
            "harness": "dataspace-agent",
            "model": {
                "id": slug(b),
                "base_url": url,
                "key_env": KEY_ENV,
                "prices": {"input": 1.0, "cached_input": 0.1, "output": 4.0},
                "max_concurrency": 1024,
            },
        }
        for b, url in urls.items()
    ]
    spec = {
        "schema_version": "1.0",
        "run_id": RUN_ID,
        "release": str(release),
        "store": str(store),
        "agents": agents,
        "sandbox": {"backend": "local", "cpus": 1, "memory": "1GiB"},
        "concurrency": concurrency,
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# ---- watching the run's processes ---------------------------------------------------------


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """(parent pid, CPU ticks, its reaped children's CPU ticks, resident pages), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (
        int(fields[1]),
        int(fields[11]) + int(fields[12]),
        int(fields[13]) + int(fields[14]),
        int(fields[21]),
    )


def _kind(pid: int, parent_kind: str | None, workers: set[int]) -> str:
    """What a process of the run's tree is: the controller, a Ray worker, a sandbox's, Ray's."""
    if parent_kind is None:
        return "controller"
    if pid in workers:
        return "workers"
    if parent_kind in ("workers", "sandboxes"):
        return "sandboxes"  # a sandbox's processes, below the worker that made it
    try:  # a worker names itself (ray::IDLE, ray::run_attempt) once it has started
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        cmd = b""
    if cmd.startswith(b"ray::"):
        workers.add(pid)
        return "workers"
    return "ray"  # gcs_server, raylet, the head's helpers


class TreeSampler:
    """Samples CPU and resident memory of a process and its descendants, by kind."""

    def __init__(self, root: int, interval: float = 0.5) -> None:
        self.root = root
        self.interval = interval
        self.cpu: dict[int, tuple[str, int]] = {}  # pid -> (kind, last CPU ticks)
        # a worker's reaped children: its sandboxes' processes, every one of them
        self.reaped: dict[int, int] = {}
        self.peak: dict[str, int] = {}  # kind -> peak of the summed resident set (bytes)
        self.peak_workers = 0
        self._workers: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                s = _stat(int(entry))
                if s is not None:
                    stats[int(entry)] = s
        parents = {pid: s[0] for pid, s in stats.items()}
        children: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
            children.setdefault(ppid, []).append(pid)
        rss: dict[str, int] = {}
        workers = 0
        todo: list[tuple[int, str | None]] = [(self.root, None)] if self.root in stats else []
        while todo:  # parents before children, so a sandbox is known by its worker
            pid, parent_kind = todo.pop()
            kind = _kind(pid, parent_kind, self._workers)
            if kind != "sandboxes":  # counted once reaped, by their worker
                self.cpu[pid] = (kind, stats[pid][1])
            if kind == "workers":
                self.reaped[pid] = stats[pid][2]
            rss[kind] = rss.get(kind, 0) + stats[pid][3] * _PAGE
            workers += kind == "workers"
            todo.extend((child, kind) for child in children.get(pid, ()))
        for kind, value in rss.items():
            self.peak[kind] = max(self.peak.get(kind, 0), value)
        self.peak_workers = max(self.peak_workers, workers)

    def cpu_seconds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for kind, ticks in self.cpu.values():
            out[kind] = out.get(kind, 0.0) + ticks / _TICK
        # the sandboxes' processes as their workers reaped them (none is missed between
        # samples), instead of the running ones sampled
        out["sandboxes"] = sum(self.reaped.values()) / _TICK
        return out


# ---- one run -----------------------------------------------------------------------------


def run_once(
    work: Path, release: Path, attempts: list[Any], concurrency: int, index: int
) -> dict[str, Any]:
    backbones = list(dict.fromkeys(a.backbone for a in attempts))
    servers = {b: bench_agent.ModelServer(scripts_for(attempts, b), 0.0) for b in backbones}
    store = work / f"store-{index}"
    spec = write_spec(
        work / f"spec-{index}.yaml",
        release,
        store,
        {b: s.url for b, s in servers.items()},
        concurrency,
    )
    ray_dir = Path(tempfile.mkdtemp(prefix="dsb-", dir="/tmp"))  # Ray's socket paths stay short
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update({KEY_ENV: "bench-key", "RAY_TMPDIR": str(ray_dir), "PYTHONUNBUFFERED": "1"})
    log = work / f"run-{index}.log"
    m0 = sum(s.cpu_seconds() for s in servers.values())
    t0 = time.time()
    try:
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
            sampler = TreeSampler(proc.pid).start()
            _, status = os.waitpid(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            sampler.stop()
        command_wall = time.time() - t0
        model_cpu = sum(s.cpu_seconds() for s in servers.values()) - m0
    finally:
        for s in servers.values():
            s.close()
        subprocess.run(["rm", "-rf", str(ray_dir)], check=False)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"dataspace run exited {proc.returncode}; its output ends:\n{tail}")
    return measure(store, attempts, sampler, command_wall, model_cpu, concurrency)


def measure(
    store: Path,
    attempts: list[Any],
    sampler: TreeSampler,
    command_wall: float,
    model_cpu: float,
    concurrency: int,
) -> dict[str, Any]:
    run = store / "runs" / RUN_ID
    df = read_results((run / "results.parquet").read_bytes())
    scripted = {(slug(a.backbone), f"task_{a.task + 1}"): a.latency for a in attempts}
    spans, over, http = [], [], []
    for r in df.itertuples():
        doc = json.loads((run / "attempts" / r.agent / r.task_id / "1" / "run.json").read_text())
        start = float(doc["started_at"])
        spans.append((start, start + float(doc["wall_seconds"])))
        lat = scripted[r.agent, r.task_id]
        over.append(float(r.wall_seconds) - lat)
        http.append(float(r.model_seconds) - lat)
    n = len(df)
    makespan = max(e for _, e in spans) - min(s for s, _ in spans)
    best, simulated = ideal(attempts, concurrency)
    cpu = sampler.cpu_seconds()
    tree_cpu = sum(cpu.values())
    controller_cpu = cpu.get("controller", 0.0) + cpu.get("workers", 0.0)
    over.sort()
    return {
        "attempts": n,
        "expected_attempts": len(attempts),
        "unique_attempts": int(df[["agent", "task_id", "attempt"]].drop_duplicates().shape[0]),
        "statuses": {str(k): int(v) for k, v in df["status"].value_counts().items()},
        "scored": int(df["scored"].sum()),
        "passed": int(df["passed"].fillna(False).astype(bool).sum()),
        "infra_retries": int(df["infra_retries"].sum()),
        "concurrency": concurrency,
        "latencies": [a.latency for a in attempts],
        "scripted_total": sum(a.latency for a in attempts),
        "makespan": makespan,
        "command_wall": command_wall,
        "ideal": best,
        "simulated": simulated,
        "ratio": makespan / best,
        "command_ratio": command_wall / best,
        "max_overlap": _max_overlap(spans),
        "cpu_controller": controller_cpu,
        "cpu_driver": cpu.get("controller", 0.0),
        "cpu_workers": cpu.get("workers", 0.0),
        "cpu_ray": cpu.get("ray", 0.0),
        "cpu_sandboxes": cpu.get("sandboxes", 0.0),
        "cpu_model_servers": model_cpu,
        "cpu_total": tree_cpu + model_cpu,
        # no schedule on this machine's CPUs beats the CPU the run used spread over all of them
        "cpu_bound": (tree_cpu + model_cpu) / (os.cpu_count() or 1),
        "controller_cpu_per_attempt": controller_cpu / n,
        "ray_cpu_per_attempt": cpu.get("ray", 0.0) / n,
        "overhead_median": statistics.median(over),
        "overhead_mean": statistics.fmean(over),
        "overhead_p90": over[min(len(over) - 1, int(0.9 * len(over)))],
        "http_overhead_mean": statistics.fmean(http),
        "queue_mean": float(df["phase_queue_seconds"].mean()),
        "rss_driver": sampler.peak.get("controller", 0),
        "rss_workers": sampler.peak.get("workers", 0),
        "peak_workers": sampler.peak_workers,
        "rss_ray": sampler.peak.get("ray", 0),
    }


def _max_overlap(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


# ---- report ------------------------------------------------------------------------------

MIB = 1024**2


def show(f: dict[str, Any], label: str) -> None:
    n = f["attempts"]
    print(f"== {label}")
    print(
        f"  attempts {n} of {f['expected_attempts']} ({f['unique_attempts']} distinct), "
        f"statuses {f['statuses']}, scored {f['scored']}, passed {f['passed']}, "
        f"infrastructure retries {f['infra_retries']}, most at once {f['max_overlap']}"
    )
    print(
        f"  makespan {f['makespan']:.1f} s (command {f['command_wall']:.1f} s); ideal "
        f"{f['ideal']:.1f} s at {f['concurrency']}-way ({f['scripted_total']:.1f} s of "
        f"scripted model time); ratio {f['ratio']:.3f} (command {f['command_ratio']:.3f}); "
        f"controller's order with no overhead {f['simulated']:.1f} s "
        f"({f['simulated'] / f['ideal']:.3f})"
    )
    print(
        f"  controller CPU {f['cpu_controller']:.1f} s = "
        f"{f['controller_cpu_per_attempt'] * 1000:.0f} ms per attempt (process "
        f"{f['cpu_driver']:.1f} s, Ray workers {f['cpu_workers']:.1f} s);"
        f" Ray's own processes {f['cpu_ray']:.1f} s = {f['ray_cpu_per_attempt'] * 1000:.0f} ms per"
        f" attempt; sandboxes' commands {f['cpu_sandboxes']:.1f} s; model servers "
        f"{f['cpu_model_servers']:.1f} s; all together {f['cpu_total']:.1f} s, so no schedule "
        f"on {os.cpu_count()} CPUs ends before {f['cpu_bound']:.1f} s"
    )
    print(
        f"  wall per attempt beyond its scripted model time: median {f['overhead_median']:.2f} s, "
        f"mean {f['overhead_mean']:.2f} s, P90 {f['overhead_p90']:.2f} s (model calls' HTTP "
        f"{f['http_overhead_mean']:.3f} s of it); queue before a worker took it "
        f"{f['queue_mean']:.2f} s mean"
    )
    print(
        f"  memory (peak resident): controller process {f['rss_driver'] / MIB:.0f} MiB, Ray "
        f"workers {f['rss_workers'] / MIB:.0f} MiB for {f['peak_workers']} workers "
        f"({f['rss_workers'] / max(1, f['peak_workers']) / MIB:.0f} MiB each), Ray's own "
        f"processes {f['rss_ray'] / MIB:.0f} MiB",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=sim.TASKS)
    p.add_argument("--backbones", type=int, default=len(sim.BACKBONES))
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--scale", type=float, default=200.0, help="latencies divided by this")
    p.add_argument("--repeat", type=int, default=1, help="runs (medians printed last)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="12 tasks x 2 backbones at 4-way")
    p.add_argument("--json", type=Path, help="write every run's figures here")
    p.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = p.parse_args(argv)
    if args.quick:
        args.tasks, args.backbones, args.concurrency = 12, 2, 4
    if not 1 <= args.backbones <= len(sim.BACKBONES):
        raise SystemExit(f"--backbones: between 1 and {len(sim.BACKBONES)}")
    attempts = draw(args.tasks, args.backbones, args.seed, args.scale)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-full-run-"))
    work.mkdir(parents=True, exist_ok=True)
    release = work / "release"
    if not release.exists():
        write_official_release(release, tasks=args.tasks, scored=scored_tasks(args.tasks))
    print(
        f"dataspace from {Path(sys.modules['dataspace'].__file__).parent}; {os.cpu_count()} "
        f"CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print(
        f"{args.tasks} tasks x {args.backbones} backbones = {len(attempts)} attempts, "
        f"{args.concurrency} at a time; paper latencies / {args.scale:g} (seed {args.seed}), "
        f"{TURNS} model turns each; release {release}"
    )
    runs = []
    try:
        for i in range(args.repeat):
            runs.append(run_once(work, release, attempts, args.concurrency, i))
            show(runs[-1], f"run {i + 1} of {args.repeat}")
    finally:
        if args.json:
            args.json.write_text(json.dumps(runs, indent=1))
        if args.keep is None:
            subprocess.run(["rm", "-rf", str(work)], check=False)
    if len(runs) > 1:
        med = {
            k: statistics.median(r[k] for r in runs)
            for k, v in runs[0].items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        med.update({k: v for k, v in runs[0].items() if k not in med})
        show(med, f"median of {len(runs)} runs")
    return 0 if all(math.isfinite(r["ratio"]) for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
