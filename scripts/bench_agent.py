"""Benchmark DataSpace-Agent's controller: overhead per model turn, and concurrent attempts.

The scripted model runs in a process of its own (``--server-procs`` of them, attempts
spread over them), so every figure here is the controller's: its CPU is this process's,
the sandboxes' commands are its children, the model server's CPU is shown apart.

1. Overhead per model turn, model latency excluded: a scripted model (no latency) answers
   turns without tool calls (pure loop: request build, HTTP, metering, trace, reminder) and
   turns with one ``bash true`` (plus the tool path and a sandbox exec). Printed: the wall
   time per turn outside the model's HTTP round trip; of it, the sandbox commands' own
   wall time (from their start to their exit, as the trace's tool results record it: on a
   loaded host mostly the wait for the sandbox's CPU share) and the rest (the controller's
   part); the controller's CPU per turn (this process, all threads; the command's own
   processes are not in it) and the commands' CPU per turn. Medians of ``--repeat``
   attempts; the CPU figures include the sandbox's creation and removal.
2. Concurrent attempts with a ``--latency`` scripted model: N attempts in threads of one
   controller process, each in its own local sandbox doing ``--turns`` tool turns; prints
   the mean turn time, its slowdown against N=1, throughput, the mean model round trip
   of a turn (HTTP, as the client timed it), the controller's CPU, the
   sandboxes' CPU (commands), the model server's CPU, the controller's peak threads and
   file descriptors and its memory per attempt (peak resident set above the idle one,
   divided by N). "Sustained" is the largest N whose mean turn time stays within 1.5x of
   N=1.

Usage: python scripts/bench_agent.py [--turns 20] [--levels 1,2,4,8,16,32] [--latency 0.2]
       [--repeat 3] [--server-procs 2] [--protocol official] [--skip-overhead]
e.g. the many-attempts figure: --latency 2 --levels 1,64,128,256 --turns 10
``--protocol extended`` runs the agent under the extended profile (commands under
``bash -c`` instead of the official ``bash -lc``, among its other rules).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from dataspace.agents import AgentContext, AgentLimits, get_agent
from dataspace.agents.protocol import PROFILES
from dataspace.llm.models import ModelSpec
from dataspace.release import TaskInput
from dataspace.sandbox import Limits, SandboxSpec, get_backend
from dataspace.traces import EventLog

KEY_ENV = "BENCH_SCRIPTED_KEY"
_TICK = os.sysconf("SC_CLK_TCK")

# The model server: the project's scripted server, with a listen backlog for hundreds of
# simultaneous first connections (the default 5 would make the kernel drop SYNs).
_SERVER = """
import json, sys
from dataspace.testing.scripted_server import LoopbackHTTPServer, ScriptedServer
LoopbackHTTPServer.request_queue_size = 1024
with open(sys.argv[1]) as fh:
    scripts = json.load(fh)
server = ScriptedServer(scripts, latency=float(sys.argv[2])).start()
print(server.url, flush=True)
sys.stdin.read()
server.stop()
"""


_SCRATCH: list[Path] = []  # the run's one temporary folder (main makes and removes it)


def _scratch_root() -> Path | None:
    """The run's temporary folder (None: the system's)."""
    return _SCRATCH[-1] if _SCRATCH else None


class ModelServer:
    """A scripted model server in a child process (so its CPU is not the controller's)."""

    def __init__(self, scripts: dict[str, list[dict]], latency: float) -> None:
        fd, self._file = tempfile.mkstemp(prefix="scripts-", suffix=".json", dir=_scratch_root())
        with os.fdopen(fd, "w") as fh:
            json.dump(scripts, fh)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, self._file, str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert self._proc.stdout is not None
        self.url = self._proc.stdout.readline().strip()
        if not self.url:
            raise RuntimeError("the scripted model server did not start")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)
        os.unlink(self._file)


def _scratch(prefix: str) -> Path:
    """A new folder under the run's temporary folder (the system's when there is none)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_scratch_root()))


def _workspace() -> Path:
    ws = _scratch("ws-")
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


def _cpu() -> tuple[float, float]:
    """(this process's CPU seconds, its waited-for children's)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _attempt(backend, ws: Path, url: str, task_id: str, turns: int, protocol: str) -> dict:
    limits = AgentLimits(model_turns=turns + 5, tool_actions=turns + 5, wall_seconds=3600)
    sb = backend.create(SandboxSpec(workspace=ws, limits=Limits(cpus=1, wall_seconds=3700)))
    trace = _scratch("ev-") / "events.jsonl"
    ev = EventLog(trace)
    try:
        model = ModelSpec(id="bench", base_url=url, key_env=KEY_ENV, max_concurrency=1024)
        ctx = AgentContext(
            task=TaskInput(task_id=task_id, question="bench"),
            sandbox=sb,
            limits=limits,
            events=ev,
            deadline=time.monotonic() + 3600,
            settings={"model": model, "protocol": protocol},
        )
        t0 = time.perf_counter()
        r = get_agent("dataspace-agent").run(ctx)
        wall = time.perf_counter() - t0
    finally:
        ev.close()
        sb.close()
    assert r.end_state == "submitted", r
    commands = 0.0
    for line in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] == "tool_result":
            commands += event["result"].get("duration_seconds") or 0.0
    return {
        "wall": wall,
        "turns": r.model_turns,
        "model": r.usage.model_seconds,
        "commands": commands,
    }


def overhead(backend, turns: int, repeat: int, protocol: str) -> None:
    print(
        f"== controller overhead per model turn (scripted model, no latency, {turns} turns, "
        f"median of {repeat}, protocol {protocol}, load average "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
        + ")"
    )
    for tools in (False, True):
        server = ModelServer({"task_1": _script(turns, tools=tools)}, 0.0)
        try:
            _attempt(backend, _workspace(), server.url, "task_1", turns, protocol)  # warm-up
            per, cmds, model, cpu, kids = [], [], [], [], []
            for _ in range(repeat):
                c0, k0 = _cpu()
                r = _attempt(backend, _workspace(), server.url, "task_1", turns, protocol)
                c1, k1 = _cpu()
                per.append((r["wall"] - r["model"]) / r["turns"] * 1000)
                cmds.append(r["commands"] / r["turns"] * 1000)
                model.append(r["model"] / r["turns"] * 1000)
                cpu.append((c1 - c0) / r["turns"] * 1000)
                kids.append((k1 - k0) / r["turns"] * 1000)
        finally:
            server.close()
        kind = "bash true + observation" if tools else "no tool call (reminder)"
        rest = [p - c for p, c in zip(per, cmds, strict=True)]
        print(
            f"  {kind:26s} overhead/turn median {statistics.median(per):7.2f} ms "
            f"(min {min(per):.2f}): commands' wall {statistics.median(cmds):6.2f} ms, "
            f"outside the commands {statistics.median(rest):6.2f} ms; "
            f"controller CPU/turn {statistics.median(cpu):6.2f} ms; "
            f"commands' CPU/turn {statistics.median(kids):5.2f} ms; "
            f"model HTTP round trip {statistics.median(model):.2f} ms"
        )


class _Peak:
    """Samples this process's resident set, threads and open descriptors while it runs."""

    def __init__(self) -> None:
        self.rss = self.threads = self.fds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.sample()

    def sample(self) -> None:
        rss, threads = _status()
        self.rss = max(self.rss, rss)
        self.threads = max(self.threads, threads)
        self.fds = max(self.fds, len(os.listdir("/proc/self/fd")))

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _status() -> tuple[int, int]:
    """(resident set in bytes, threads) of this process."""
    rss = threads = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return rss, threads


def concurrency(
    backend, levels: list[int], turns: int, latency: float, server_procs: int, protocol: str
) -> None:
    print(
        f"== concurrent attempts, scripted model latency {latency * 1000:.0f} ms, "
        f"protocol {protocol}, "
        f"{turns} tool turns each, {os.cpu_count()} CPUs, load average "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    print(
        f"  {'N':>4} {'mean turn s':>12} {'slowdown':>9} {'turns/s':>8} {'wall s':>7} "
        f"{'model s':>8} {'ctrl CPU %':>10} {'cmds CPU %':>10} {'model CPU %':>11} {'threads':>7} "
        f"{'fds':>5} {'MiB/attempt':>11}"
    )
    warm = ModelServer({"task_1": _script(2, tools=True)}, 0.0)
    try:  # the first attempt of a process imports the model client: not a level's cost
        _attempt(backend, _workspace(), warm.url, "task_1", 2, protocol)
    finally:
        warm.close()
    base = None
    sustained = 0
    n_max = max(levels)
    scripts = {f"task_{i}": _script(turns, tools=True) for i in range(1, n_max + 1)}
    servers = [
        ModelServer(
            {k: v for j, (k, v) in enumerate(scripts.items()) if j % server_procs == s}, latency
        )
        for s in range(server_procs)
    ]
    try:
        for n in levels:
            ws = _workspace()
            out: list[dict] = []
            lock = threading.Lock()

            def one(i: int, ws: Path = ws, out: list = out, lock: threading.Lock = lock) -> None:
                url = servers[(i - 1) % server_procs].url
                r = _attempt(backend, ws, url, f"task_{i}", turns, protocol)
                with lock:
                    out.append(r)

            idle_rss, _ = _status()
            c0, k0 = _cpu()
            m0 = sum(s.cpu_seconds() for s in servers)
            t0 = time.perf_counter()
            threads = [threading.Thread(target=one, args=(i,)) for i in range(1, n + 1)]
            with _Peak() as peak:
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            wall = time.perf_counter() - t0
            c1, k1 = _cpu()
            m1 = sum(s.cpu_seconds() for s in servers)
            if len(out) != n:
                raise SystemExit(f"N={n}: only {len(out)} of {n} attempts finished")
            mean_turn = statistics.mean(r["wall"] / r["turns"] for r in out)
            model_turn = statistics.mean(r["model"] / r["turns"] for r in out)
            base = base or mean_turn
            total_turns = sum(r["turns"] for r in out)
            if mean_turn <= 1.5 * base:
                sustained = n
            per_attempt = max(0, peak.rss - idle_rss) / n / 1024**2
            print(
                f"  {n:>4} {mean_turn:>12.3f} {mean_turn / base:>9.2f} "
                f"{total_turns / wall:>8.1f} {wall:>7.1f} {model_turn:>8.3f} "
                f"{(c1 - c0) / wall * 100:>10.0f} "
                f"{(k1 - k0) / wall * 100:>10.0f} {(m1 - m0) / wall * 100:>11.0f} "
                f"{peak.threads:>7} {peak.fds:>5} {per_attempt:>11.2f}",
                flush=True,
            )
    finally:
        for s in servers:
            s.close()
    print(f"  sustained (mean turn within 1.5x of N=1): {sustained} concurrent attempts")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=20)
    p.add_argument("--levels", default="1,2,4,8,16,32")
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--repeat", type=int, default=3, help="attempts per overhead figure")
    p.add_argument("--server-procs", type=int, default=2, help="model server processes")
    p.add_argument(
        "--protocol", default="official", choices=sorted(PROFILES), help="the agent's profile"
    )
    p.add_argument("--skip-overhead", action="store_true")
    p.add_argument("--skip-concurrency", action="store_true")
    args = p.parse_args()
    os.environ.setdefault(KEY_ENV, "bench-key")
    levels = [int(x) for x in args.levels.split(",")]
    # one descriptor set per attempt: sockets, pipes, pidfds, its sandbox's files
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 64 * max(levels)))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    backend = get_backend("local")
    print(f"dataspace from {Path(sys.modules['dataspace'].__file__).parent}")
    # every workspace and trace of the run under one folder, removed at the end (a run
    # makes one of each per attempt: thousands at the higher levels)
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as scratch:
        os.chmod(scratch, 0o755)  # the sandbox's user reaches the workspaces under it
        _SCRATCH.append(Path(scratch))
        try:
            if not args.skip_overhead:
                overhead(backend, args.turns, args.repeat, args.protocol)
            if not args.skip_concurrency:
                concurrency(
                    backend, levels, args.turns, args.latency, args.server_procs, args.protocol
                )
        finally:
            _SCRATCH.pop()


if __name__ == "__main__":
    main()
