"""Many attempts at once on a small Ray node: the run's concurrency is the limit, not its CPUs.

A real run on local Ray with 2 CPUs, real local sandboxes and DataSpace-Agent against the
scripted model on loopback. Every attempt's first model call is held at a gate until the
server holds all of them, so the test proves they were in flight together without any
timing threshold; the overlap is then read back from the attempts' own start and end
times in the store.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from dataspace.llm.models import ModelSpec
from dataspace.runs.controller import execute_run
from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig
from dataspace.runs.turns import attempt_cpus
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]

KEY_ENV = "DATASPACE_PER_NODE_TEST_KEY"
N = 8


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end before a start at the same time)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def test_max_overlap_counts_open_intervals():
    assert _max_overlap([(0, 2), (1, 3), (2.5, 4)]) == 2
    assert _max_overlap([(0, 1), (1, 2)]) == 1


def test_eight_attempts_run_at_once_on_a_two_cpu_ray_node(tmp_path, ray_local, monkeypatch):
    """Guards the per-attempt CPU share: one CPU each ran 2 attempts at a time on 2 CPUs."""
    assert ray_local.cluster_resources()["CPU"] == 2
    monkeypatch.setenv(KEY_ENV, "unused")
    release = write_tiny_release(tmp_path / "rel", tasks=N)
    held = {"faults": [{"wait": "all-in-flight", "timeout": 600}]}
    final = {
        "tool_calls": [
            {"name": "bash", "arguments": {"command": "echo x > /output/prediction.csv"}},
            {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}},
        ]
    }
    scripts = {f"task_{k}": [{"content": "looking", **held}, final] for k in range(1, N + 1)}
    with ScriptedServer(scripts) as srv:
        model = ModelSpec(id="scripted", base_url=srv.url, key_env=KEY_ENV, max_concurrency=64)
        spec = RunSpec(
            run_id="per-node",
            release=str(release),
            store=f"file://{tmp_path / 'store'}",
            agents=(AgentSpec(name="react", harness="dataspace-agent", model=model),),
            limits=Limits(memory_bytes=512 * 1024**2, wall_seconds=900),
            sandbox=SandboxConfig(),
            concurrency=N,
            prestart=0,
        )
        seen: list[dict] = []
        box: dict = {}

        def run() -> None:
            try:
                box["outcome"] = execute_run(spec, progress=seen.append)
            except BaseException as exc:
                box["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 600
        while srv.in_flight < N and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        held_at_once = srv.in_flight
        srv.open_gate("all-in-flight")  # let the run end whatever happened
        thread.join(timeout=600)
    assert "error" not in box, box.get("error")
    assert held_at_once == N, f"only {held_at_once} of {N} attempts reached the model at once"
    started = [e for e in seen if e.get("event") == "started"]
    assert started and started[0]["attempt_cpus"] == attempt_cpus(2, N) == 0.25
    out = box["outcome"]
    assert out.executed == N and {r["status"] for r in out.rows} == {"submitted"}
    store = open_store(spec.store)
    spans = []
    for k in range(1, N + 1):
        run_doc = json.loads(store.get_bytes(f"runs/per-node/attempts/react/task_{k}/1/run.json"))
        spans.append((run_doc["started_at"], run_doc["started_at"] + run_doc["wall_seconds"]))
    assert _max_overlap(spans) == N
