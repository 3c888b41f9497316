"""Benchmark DataSpace-Agent's controller: overhead per model turn, and concurrent attempts.

1. Overhead per model turn, model latency excluded: a scripted model (no latency) answers
   turns without tool calls (pure loop: request build, HTTP, metering, trace, reminder) and
   turns with one ``bash true`` (plus the tool path and a sandbox exec).
2. Concurrent attempts with a 200 ms-latency scripted model: N attempts in threads of one
   controller process, each in its own local sandbox doing ``--turns`` tool turns; prints
   the mean turn time, its slowdown against N=1, throughput, and the controller's CPU.
   "Sustained" is the largest N whose mean turn time stays within 1.5x of N=1.

Usage: python scripts/bench_agent.py [--turns 20] [--levels 1,2,4,8,16,32] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

from dataspace.agents import AgentContext, AgentLimits, get_agent
from dataspace.llm.models import ModelSpec
from dataspace.release import TaskInput
from dataspace.sandbox import Limits, SandboxSpec, get_backend
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.traces import EventLog

KEY_ENV = "BENCH_SCRIPTED_KEY"


def _workspace() -> Path:
    ws = Path(tempfile.mkdtemp(prefix="bench-agent-ws-"))
    (ws / "a.csv").write_text("x\n1\n")
    os.chmod(ws, 0o755)
    os.chmod(ws / "a.csv", 0o644)
    return ws


def _script(turns: int, *, tools: bool) -> list[dict]:
    step = (
        {"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}
        if tools
        else {"content": "thinking"}
    )
    final = {
        "tool_calls": [
            {"name": "bash", "arguments": {"command": "echo x > /output/prediction.csv"}},
            {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}},
        ]
    }
    return [step] * (turns - 1) + [final]


def _attempt(backend, ws: Path, server: ScriptedServer, task_id: str, turns: int) -> dict:
    limits = AgentLimits(model_turns=turns + 5, tool_actions=turns + 5, wall_seconds=600)
    sb = backend.create(SandboxSpec(workspace=ws, limits=Limits(cpus=1, wall_seconds=700)))
    ev = EventLog(Path(tempfile.mkdtemp(prefix="bench-agent-ev-")) / "events.jsonl")
    try:
        model = ModelSpec(id="bench", base_url=server.url, key_env=KEY_ENV, max_concurrency=256)
        ctx = AgentContext(
            task=TaskInput(task_id=task_id, question="bench"),
            sandbox=sb,
            limits=limits,
            events=ev,
            deadline=time.monotonic() + 600,
            settings={"model": model},
        )
        t0 = time.perf_counter()
        r = get_agent("dataspace-agent").run(ctx)
        wall = time.perf_counter() - t0
    finally:
        ev.close()
        sb.close()
    assert r.end_state == "submitted", r
    return {"wall": wall, "turns": r.model_turns, "model": r.usage.model_seconds}


def overhead(backend, turns: int) -> None:
    print(f"== controller overhead per model turn (scripted model, no latency, {turns} turns)")
    for tools in (False, True):
        with ScriptedServer({"task_1": _script(turns, tools=tools)}) as srv:
            runs = [_attempt(backend, _workspace(), srv, "task_1", turns) for _ in range(3)]
        per = [(r["wall"] - r["model"]) / r["turns"] * 1000 for r in runs]
        model = [r["model"] / r["turns"] * 1000 for r in runs]
        kind = "bash true + observation" if tools else "no tool call (reminder)"
        print(
            f"  {kind:26s} overhead/turn median {statistics.median(per):7.2f} ms "
            f"(min {min(per):.2f}); model HTTP round trip {statistics.median(model):.2f} ms"
        )


def concurrency(backend, levels: list[int], turns: int, latency: float) -> None:
    print(
        f"== concurrent attempts, scripted model latency {latency * 1000:.0f} ms, "
        f"{turns} tool turns each, {os.cpu_count()} CPUs"
    )
    print(
        f"  {'N':>4} {'mean turn s':>12} {'slowdown':>9} {'turns/s':>8} {'wall s':>7} "
        f"{'ctrl CPU %':>10}"
    )
    base = None
    sustained = 0
    scripts = {f"task_{i}": _script(turns, tools=True) for i in range(1, max(levels) + 1)}
    with ScriptedServer(scripts, latency=latency) as srv:
        for n in levels:
            ws = _workspace()
            out: list[dict] = []
            lock = threading.Lock()

            def one(i: int, ws: Path = ws, out: list = out, lock: threading.Lock = lock) -> None:
                r = _attempt(backend, ws, srv, f"task_{i}", turns)
                with lock:
                    out.append(r)

            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            threads = [threading.Thread(target=one, args=(i,)) for i in range(1, n + 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = (cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime) / wall * 100
            mean_turn = statistics.mean(r["wall"] / r["turns"] for r in out)
            base = base or mean_turn
            total_turns = sum(r["turns"] for r in out)
            if mean_turn <= 1.5 * base:
                sustained = n
            print(
                f"  {n:>4} {mean_turn:>12.3f} {mean_turn / base:>9.2f} "
                f"{total_turns / wall:>8.1f} {wall:>7.1f} {cpu:>10.0f}"
            )
    print(f"  sustained (mean turn within 1.5x of N=1): {sustained} concurrent attempts")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=20)
    p.add_argument("--levels", default="1,2,4,8,16,32")
    p.add_argument("--latency", type=float, default=0.2)
    args = p.parse_args()
    os.environ.setdefault(KEY_ENV, "bench-key")
    backend = get_backend("local")
    overhead(backend, args.turns)
    concurrency(backend, [int(x) for x in args.levels.split(",")], args.turns, args.latency)


if __name__ == "__main__":
    main()
