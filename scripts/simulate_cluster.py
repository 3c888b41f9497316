"""Simulate a full benchmark on a cluster and measure what one attempt costs the controller.

Part 1 (simulation): 410 tasks x 6 backbones at 64-way concurrency. Each attempt's agent
latency follows a Weibull distribution fitted to the paper's per-backbone mean and P90
(agent-protocol.md), capped at the 1,800 s wall clock; each sandbox pod takes a start-up
delay (log-normal) and holds one of ``max_pending`` creation slots until it is ready
(scheduling, image start and, in stream mode, the workspace tar through the API server).
Prints the makespan against the ideal (total agent time / slots, or the longest attempt)
for each scenario three times, on the same draws: the spec's order (backbone by backbone as
the spec lists them), before (longest expected attempts first, by the controller's own
function ``dataspace.runs.expected.longest_first`` over the paper's figures, each attempt
holding its place from its sandbox's creation to its deletion) and after (the same order
with the controller's turns, ``dataspace.runs.turns``: sandboxes prepared ahead, the place
handed on when the agent ends); and how it moves with the start-up delay, cold image
pulls, a pre-pull DaemonSet (every node pulls the runtime image before the run starts: the
controller waits until every schedulable node lists it, after the slowest node's pull,
then pods start warm) and the creation limit.

Part 2 (measured): a real run of the gold agent (Ray, the kubernetes sandbox backend
against the loopback fake cluster, an ``s3://`` store on a moto server behind a counting
proxy) gives the Kubernetes API calls, S3 requests and S3 bytes of one attempt; and the
controller memory per live sandbox is measured with the fake in another process.

    .venv/bin/python scripts/simulate_cluster.py [--seed 0] [--no-measure]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import heapq
import http.client
import math
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dataspace.limits import Limits
from dataspace.runs.expected import PAPER_LATENCY, expected_durations, longest_first
from dataspace.runs.spec import AgentSpec
from dataspace.runs.turns import in_flight, suggested_prestart

#: (mean, P90) agent latency in seconds per backbone, the paper's Table (agent-protocol.md).
BACKBONES = PAPER_LATENCY
TASKS = 410
WALL_SECONDS = Limits().wall_seconds
#: what the controller expects of each backbone's attempts (no earlier runs: the paper's)
EXPECTED = expected_durations(
    [AgentSpec(name=name, harness="dataspace-agent") for name in BACKBONES],
    cap=WALL_SECONDS,
    history={},
)
RELEASE_BYTES = 15.01e9
WORKSPACE_MEDIAN, WORKSPACE_P90 = 31e6, 74e6  # bytes per task (agent-protocol.md)
Z90 = 1.2815515655446004


# ---- distributions --------------------------------------------------------------------------


def weibull_for(mean: float, p90: float) -> tuple[float, float]:
    """Shape k and scale of the Weibull with this mean and P90 (the branch with k >= 0.55).

    The ratio P90/mean = ln(10)^(1/k) / Gamma(1 + 1/k) peaks near k = 0.55; the paper's
    ratios (1.8 to 2.6) all lie below the peak, and the larger k is the lighter tail.
    """

    def ratio(k: float) -> float:
        return math.log(10) ** (1 / k) / math.gamma(1 + 1 / k)

    target = p90 / mean
    lo, hi = 0.56, 20.0
    if target > ratio(lo):
        raise ValueError(f"P90/mean = {target:.2f} is beyond any Weibull")
    for _ in range(100):
        mid = (lo + hi) / 2
        if ratio(mid) > target:
            lo = mid
        else:
            hi = mid
    k = (lo + hi) / 2
    return k, mean / math.gamma(1 + 1 / k)


def lognormal_for(median: float, p90: float) -> tuple[float, float]:
    """mu and sigma of the log-normal with this median and P90."""
    return math.log(median), (math.log(p90) - math.log(median)) / Z90


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """One simulated cluster set-up."""

    slots: int = 64
    max_pending: int = 16
    startup_median: float = 4.0
    startup_p90: float = 10.0
    staging: str = "stream"  # stream | node (node-local cache) | shared (one shared volume)
    stream_mb_s: float = 60.0
    s3_mb_s: float = 200.0
    nodes: int = 16
    teardown: float = 1.0
    order: str = "plan"  # plan (the old order) | shuffled | longest-first (the controller's)
    prepull: bool = False  # a DaemonSet pulls the image on every node before the run
    pull_median: float = 30.0
    pull_p90: float = 90.0
    turns: bool = False  # the controller's turns (dataspace.runs.turns); False: the old loop


@dataclass(frozen=True, kw_only=True)
class Attempt:
    backbone: str
    task: int
    latency: float
    startup: float
    workspace: float

    @property
    def agent(self) -> str:
        """The agent running it (one per backbone), as the controller's order reads it."""
        return self.backbone


def draw_attempts(rng: random.Random, sc: Scenario) -> list[Attempt]:
    """Attempts in the controller's plan order (backbone by backbone, task by task)."""
    mu, sigma = lognormal_for(sc.startup_median, sc.startup_p90)
    wmu, wsigma = lognormal_for(WORKSPACE_MEDIAN, WORKSPACE_P90)
    sizes = [rng.lognormvariate(wmu, wsigma) for _ in range(TASKS)]
    out = []
    for name, (mean, p90) in BACKBONES.items():
        k, scale = weibull_for(mean, p90)
        for task in range(TASKS):
            latency = min(WALL_SECONDS, rng.weibullvariate(scale, k))
            out.append(
                Attempt(
                    backbone=name,
                    task=task,
                    latency=latency,
                    startup=rng.lognormvariate(mu, sigma),
                    workspace=sizes[task],
                )
            )
    return out


def median_outcome(sc: Scenario, *, seed: int = 0, repeats: int = 7) -> Outcome:
    """The draw with the median makespan ratio among ``repeats`` seeded draws of ``sc``.

    Draw ``r`` uses seed ``seed * 1000 + r`` whatever the scenario's order, so scenarios
    that differ only in how the controller schedules see the same attempts.
    """
    outs = []
    for r in range(repeats):
        rng = random.Random(seed * 1000 + r)
        attempts = ordered(draw_attempts(rng, sc), sc.order, rng)
        outs.append(simulate(attempts, sc, prepull=draw_prepull(rng, sc)))
    outs.sort(key=lambda o: o.makespan / o.ideal)
    mid = outs[len(outs) // 2]
    with_pull = statistics.median((o.makespan + o.prepull) / o.ideal for o in outs)
    return dataclasses.replace(mid, ratio_with_prepull=with_pull)


def ordered(attempts: list[Attempt], order: str, rng: random.Random) -> list[Attempt]:
    if order == "plan":
        return list(attempts)
    if order == "shuffled":
        out = list(attempts)
        rng.shuffle(out)
        return out
    return longest_first(attempts, EXPECTED)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    makespan: float
    ideal: float
    startup_wait: float
    pending_peak: int
    staged_bytes: float
    prepull: float = 0.0
    ratio_with_prepull: float = 0.0  # median over the draws of (makespan + pre-pull) / ideal


def draw_prepull(rng: random.Random, sc: Scenario) -> float:
    """Seconds before the run starts: the slowest node's image pull (0 without pre-pull).

    The DaemonSet's pods pull on every node at once; the run waits for the last of them.
    """
    if not sc.prepull:
        return 0.0
    mu, sigma = lognormal_for(sc.pull_median, sc.pull_p90)
    return max(rng.lognormvariate(mu, sigma) for _ in range(sc.nodes))


def simulate(attempts: list[Attempt], sc: Scenario, *, prepull: float = 0.0) -> Outcome:
    """Discrete-event simulation of the run: slots, creation slots, start-up, agent, teardown.

    With ``turns`` the controller keeps ``in_flight(slots)`` attempts in flight (the
    controller's own function, ``dataspace.runs.turns.in_flight``): each creates its sandbox
    at once (holding a creation slot until ready), then waits for one of ``slots`` turns to
    run its agent, and hands the turn on as soon as the agent ends (the teardown goes on
    beside the next agent). Without, ``slots`` attempts are in flight and each holds its
    place from its sandbox's creation to the end of its teardown. ``prepull`` seconds pass
    before the first pod is asked for; the makespan is counted from then (the run starts
    once every node lists the image the DaemonSet pulled).
    """
    ideal = max(sum(a.latency for a in attempts) / sc.slots, max(a.latency for a in attempts))
    queue = list(attempts)
    queue.reverse()
    events: list[tuple[float, int, str, Any]] = []
    seq = 0
    free_create = sc.max_pending
    free_turns = sc.slots
    waiting_create: list[tuple[Attempt, float]] = []
    waiting_turn: list[tuple[Attempt, float]] = []
    node_cache: set[tuple[int, int]] = set()
    staged = 0.0
    startup_wait = 0.0
    pending_peak = 0
    now = prepull
    node_of = 0

    def push(t: float, kind: str, payload: Any) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, payload))

    def start_pod(a: Attempt, t: float, asked: float) -> None:
        nonlocal free_create, staged, node_of, pending_peak
        free_create -= 1
        pending_peak = max(pending_peak, sc.max_pending - free_create)
        if sc.staging == "stream":
            stage = a.workspace / (sc.stream_mb_s * 1e6)
            staged += a.workspace
        elif sc.staging == "shared":
            key = (0, a.task)
            stage = 0.0
            if key not in node_cache:
                node_cache.add(key)
                stage = a.workspace / (sc.s3_mb_s * 1e6)
                staged += a.workspace
        else:
            node = node_of % sc.nodes
            node_of += 1
            key = (node, a.task)
            if key in node_cache:
                stage = 0.0
            else:
                node_cache.add(key)
                stage = a.workspace / (sc.s3_mb_s * 1e6)
                staged += a.workspace
        push(t + a.startup + stage, "ready", (a, asked))

    def run_agent(a: Attempt, t: float) -> None:
        nonlocal free_turns
        free_turns -= 1
        if sc.turns:
            push(t + a.latency, "agent_done", a)
        else:
            push(t + a.latency + sc.teardown, "agent_done", a)

    flight = in_flight(sc.slots, suggested_prestart(sc.slots)) if sc.turns else sc.slots
    for _ in range(min(flight, len(queue))):
        push(prepull, "slot", None)
    finished = 0
    while events:
        now, _, kind, payload = heapq.heappop(events)
        if kind == "slot":
            if queue:
                a = queue.pop()
                if free_create > 0:
                    start_pod(a, now, now)
                else:
                    waiting_create.append((a, now))
        elif kind == "ready":
            a, asked = payload
            free_create += 1
            if waiting_create:
                nxt, asked_at = waiting_create.pop(0)
                start_pod(nxt, now, asked_at)
            if free_turns > 0:
                startup_wait += now - asked
                run_agent(a, now)
            else:
                waiting_turn.append((a, asked))
        elif kind == "agent_done":
            free_turns += 1
            if waiting_turn:
                nxt, asked_at = waiting_turn.pop(0)
                run_agent(nxt, now)
            push(now + (sc.teardown if sc.turns else 0.0), "done", payload)
        elif kind == "done":
            finished += 1
            push(now, "slot", None)
    assert finished == len(attempts), (finished, len(attempts))
    return Outcome(
        makespan=now - prepull,
        ideal=ideal,
        startup_wait=startup_wait / len(attempts),
        pending_peak=pending_peak,
        staged_bytes=staged,
        prepull=prepull,
        ratio_with_prepull=now / ideal,
    )


# ---- measurements -----------------------------------------------------------------------------


class _CountingProxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    upstream: tuple[str, int]
    counts: Counter[str]
    lock: threading.Lock

    def log_message(self, *args: Any) -> None:
        return

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        headers["Host"] = f"{self.upstream[0]}:{self.upstream[1]}"
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        kind = _s3_kind(self.command, self.path)
        with self.lock:
            self.counts[f"requests {kind}"] += 1
            self.counts["requests"] += 1
            self.counts["bytes up"] += len(body)
            self.counts["bytes down"] += len(data)
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


def _s3_kind(method: str, path: str) -> str:
    if method == "GET" and ("list-type=2" in path or path.rstrip("/").count("/") <= 1):
        return "LIST"
    return method


@contextlib.contextmanager
def counting_proxy(upstream: str) -> Iterator[tuple[str, Counter[str]]]:
    host, port = upstream.split("://", 1)[1].split(":")
    counts: Counter[str] = Counter()

    class Handler(_CountingProxy):
        pass

    Handler.upstream = (host, int(port))
    Handler.counts = counts
    Handler.lock = threading.Lock()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counts
    finally:
        server.shutdown()
        server.server_close()


def measure_run(work: Path) -> dict[str, Any] | None:
    """A real run: gold on a tiny release, kubernetes backend on the fake, s3 on moto."""
    try:
        import ray

        from dataspace.runs.controller import execute_run
        from dataspace.runs.spec import AgentSpec, RunSpec, SandboxConfig
        from dataspace.testing.fake_k8s import FakeKubernetes, chroot_runtime_available
        from dataspace.testing.releases import write_tiny_release
        from dataspace.testing.s3server import TEST_CREDENTIALS, create_bucket, moto_s3_server
    except ImportError as exc:
        print(f"  (skipped: {exc})")
        return None
    if not chroot_runtime_available():
        print("  (skipped: the fake cluster's container runtime needs root and unshare)")
        return None
    release = write_tiny_release(work / "release", tasks=3)
    binds = tuple(sorted({sys.prefix, sys.base_prefix}))
    with moto_s3_server() as endpoint, counting_proxy(endpoint) as (proxy, counts):
        create_bucket(endpoint, "bench")
        os.environ.update(
            {
                "DATASPACE_S3_ENDPOINT": proxy,
                "AWS_ACCESS_KEY_ID": TEST_CREDENTIALS["access_key_id"],
                "AWS_SECRET_ACCESS_KEY": TEST_CREDENTIALS["secret_access_key"],
                "AWS_DEFAULT_REGION": TEST_CREDENTIALS["region"],
            }
        )
        with FakeKubernetes(image_binds=binds) as fake:
            options = {
                "api_host": fake.url,
                "namespace": "sim",
                "slots": "thread",
                "workspace_cache_dir": str(work / "cache"),
                "path": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
            }
            agents = tuple(AgentSpec(name=f"gold{i}", harness="gold") for i in range(2))
            spec = RunSpec(
                run_id="sim",
                release=str(release),
                store="s3://bench/store",
                agents=agents,
                concurrency=2,
                sandbox=SandboxConfig(backend="kubernetes", options=options),
            )
            os.environ["RAY_AUTH_MODE"] = "disabled"  # a loopback-only instance
            ray.init(
                num_cpus=2,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                _node_ip_address="127.0.0.1",
            )
            try:
                before = Counter(counts)
                outcome = execute_run(spec)
            finally:
                ray.shutdown()
            calls = dict(fake.calls)
            leftover = fake.pod_names()
    attempts = len(outcome.rows)
    s3 = {k: v - before.get(k, 0) for k, v in counts.items()}
    return {
        "attempts": attempts,
        "statuses": Counter(r["status"] for r in outcome.rows),
        "passed": sum(1 for r in outcome.rows if r.get("passed")),
        "s3": s3,
        "k8s": calls,
        "leftover_pods": leftover,
    }


def _serve_fake(conn: Any) -> None:
    from dataspace.testing.fake_k8s import FakeKubernetes

    # a node as large as the measurement needs: the fake schedules by requests, and 33
    # default-sized sandboxes live at once here
    with FakeKubernetes(runtime="host", node_allocatable={"cpu": "512", "memory": "4Ti"}) as fake:
        conn.send(fake.url)
        conn.recv()


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def measure_memory(work: Path, count: int = 32) -> dict[str, float]:
    """Controller memory: importing the backend, and per live sandbox (fake in a subprocess)."""
    import gc
    import tracemalloc

    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("fork").Process(target=_serve_fake, args=(child,))
    proc.start()
    try:
        url = parent.recv()
        rss0 = _rss()
        from dataspace.sandbox.base import SandboxSpec
        from dataspace.sandbox.kubernetes import KubernetesBackend

        backend = KubernetesBackend(
            api_host=url,
            namespace="mem",
            slots="thread",
            workspace_cache_dir=str(work / "mem-cache"),
        )
        ws = work / "mem-ws"
        ws.mkdir(exist_ok=True)
        (ws / "data.csv").write_text("a\n1\n")
        first = backend.create(SandboxSpec(workspace=ws, labels={"run": "mem"}))
        first.exec("true")
        rss1 = _rss()
        gc.collect()
        tracemalloc.start()
        snap0 = tracemalloc.take_snapshot()
        boxes = [
            backend.create(SandboxSpec(workspace=ws, labels={"run": "mem"})) for _ in range(count)
        ]
        for box in boxes:
            box.exec("true")
        gc.collect()
        snap1 = tracemalloc.take_snapshot()
        rss2 = _rss()
        heap = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
        tracemalloc.stop()
        for box in [first, *boxes]:
            box.close()
    finally:
        parent.send("stop")
        proc.join(timeout=30)
    return {
        "import_and_first_sandbox_mib": (rss1 - rss0) / 2**20,
        "rss_per_sandbox_kib": (rss2 - rss1) / count / 1024,
        "python_heap_per_sandbox_kib": heap / count / 1024,
    }


# ---- report -----------------------------------------------------------------------------------


def fmt_hours(seconds: float) -> str:
    return f"{seconds / 3600:6.2f} h"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=7, help="draws per scenario (median shown)")
    p.add_argument("--no-measure", action="store_true", help="skip the measured part")
    args = p.parse_args(argv)

    print(f"== fitted agent latency (Weibull, capped at {WALL_SECONDS:.0f} s), 410 draws each")
    rng = random.Random(args.seed)
    print(f"{'backbone':18} {'k':>5} {'mean':>7} {'P90':>7} | {'sim mean':>8} {'sim P90':>8}")
    for name, (mean, p90) in BACKBONES.items():
        k, scale = weibull_for(mean, p90)
        xs = sorted(min(WALL_SECONDS, rng.weibullvariate(scale, k)) for _ in range(20000))
        print(
            f"{name:18} {k:5.2f} {mean:7.1f} {p90:7.1f} | {statistics.fmean(xs):8.1f} "
            f"{xs[int(0.9 * len(xs))]:8.1f}"
        )

    def run(sc: Scenario) -> Outcome:
        return median_outcome(sc, seed=args.seed, repeats=args.repeats)

    print(
        "\n== 410 tasks x 6 backbones = 2,460 attempts, 64 at a time (median of "
        f"{args.repeats} draws)"
    )
    header = (
        f"{'scenario':40} {'order':15} {'makespan':>9} {'ideal':>9} {'ratio':>6} "
        f"{'start wait':>10} {'pending':>7} {'pre-pull':>8} {'ratio incl. pre-pull':>20}"
    )
    print(header)
    cold = {"startup_median": 30.0, "startup_p90": 90.0}
    scenarios = [
        ("pod start 4 s (P90 10 s)", Scenario()),
        ("cold image pulls: start 30 s (P90 90 s)", Scenario(**cold)),
        ("cold pulls, pre-pull DaemonSet", Scenario(prepull=True)),
        ("creation limit 4", Scenario(max_pending=4)),
        ("creation limit 4, cold pulls", Scenario(max_pending=4, **cold)),
        ("creation limit 4, cold pulls, pre-pull", Scenario(max_pending=4, prepull=True)),
        ("creation limit 64", Scenario(max_pending=64)),
        ("creation limit 64, cold pulls", Scenario(max_pending=64, **cold)),
        ("node-local cache instead of streaming", Scenario(staging="node")),
        ("shared volume instead of streaming", Scenario(staging="shared")),
    ]
    orders = (
        ("plan", {"order": "plan"}, "spec order"),
        ("before", {"order": "longest-first"}, "before"),
        ("after", {"order": "longest-first", "turns": True}, "after (turns)"),
    )
    results = {}
    for label, base_sc in scenarios:
        for order, change, order_label in orders:
            out = run(dataclasses.replace(base_sc, **change))
            results[label, order] = out
            print(
                f"{label:40} {order_label:15} {fmt_hours(out.makespan):>9} "
                f"{fmt_hours(out.ideal):>9} {out.makespan / out.ideal:6.3f} "
                f"{out.startup_wait:9.1f}s {out.pending_peak:7d} {out.prepull:7.0f}s "
                f"{out.ratio_with_prepull:20.3f}"
            )
    print(
        "ratio: the run's makespan over the ideal; with a pre-pull DaemonSet the run starts "
        "once every schedulable node lists the image, after the slowest node's pull "
        "('pre-pull', shown apart and added in the last column); prepared ahead with turns: "
        f"{in_flight(64, suggested_prestart(64)) - 64} sandboxes at 64-way (prestart: 8)"
    )
    results = {label: results[label, "after"] for label, _ in scenarios}
    base = results[scenarios[0][0]]
    node = results[scenarios[-2][0]]
    shared = results[scenarios[-1][0]]
    print(
        f"\nworkspace bytes moved for the sandboxes: streaming {base.staged_bytes / 1e9:.1f} GB "
        f"through the API server (every attempt); node-local caches "
        f"{node.staged_bytes / 1e9:.1f} GB (each workspace once per node that runs it, 16 "
        f"nodes); one shared volume {shared.staged_bytes / 1e9:.1f} GB (once per workspace)"
    )

    if args.no_measure:
        return 0
    print(
        "\n== measured: one real run (gold, 3 tasks x 2 agents; Ray, kubernetes backend on the "
        "loopback fake, s3 on moto)"
    )
    with tempfile.TemporaryDirectory(prefix="ds-sim-") as tmp:
        work = Path(tmp)
        measured = measure_run(work)
        if measured:
            n = measured["attempts"]
            s3 = measured["s3"]
            print(
                f"  attempts {n}, statuses {dict(measured['statuses'])}, passed "
                f"{measured['passed']}, pods left {len(measured['leftover_pods'])}"
            )
            per = {k: v / n for k, v in s3.items()}
            kinds = ", ".join(
                f"{k.split()[1]} {v:.1f}"
                for k, v in sorted(per.items())
                if k.startswith("requests ")
            )
            print(
                f"  S3 requests per attempt (whole run incl. spec, scan, results): "
                f"{per.get('requests', 0):.1f} ({kinds})"
            )
            print(
                f"  S3 bytes per attempt: up {per.get('bytes up', 0) / 1024:.1f} KiB, down "
                f"{per.get('bytes down', 0) / 1024:.1f} KiB"
            )
            k8s = measured["k8s"]
            print(
                "  Kubernetes API calls per attempt: "
                + ", ".join(f"{k} {v / n:.1f}" for k, v in sorted(k8s.items()))
            )
            total = 2460
            print(
                f"  projected for 2,460 attempts: {per.get('requests', 0) * total:,.0f} S3 "
                f"requests, {per.get('bytes up', 0) * total / 1e6:,.1f} MB written (agent traces "
                f"of real models are larger than gold's); the release is read from the store "
                f"once ({RELEASE_BYTES / 1e9:.2f} GB) into the shared volume"
            )
        mem = measure_memory(work)
        print(
            f"  controller memory: import + first sandbox {mem['import_and_first_sandbox_mib']:.1f}"
            f" MiB; per live sandbox {mem['rss_per_sandbox_kib']:.0f} KiB RSS, "
            f"{mem['python_heap_per_sandbox_kib']:.0f} KiB Python heap (64 live sandboxes: "
            f"{64 * mem['rss_per_sandbox_kib'] / 1024:.1f} MiB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
