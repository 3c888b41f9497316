"""Helpers for agent-loop tests: run an agent on a real sandbox against the scripted server."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataspace.agents import AgentContext, AgentLimits, AgentResult, get_agent
from dataspace.llm.models import ModelSpec
from dataspace.release import TaskInput
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.traces import EventLog

KEY_ENV = "DATASPACE_TEST_MODEL_KEY"
SECRET = "sk-test-9f3c1e7ab2d54c60a1b8e0d2"  # a stand-in key that must never leak
PRICES = {"price_input": 2.0, "price_cached_input": 0.5, "price_output": 8.0}


def _csv(rows: list[list[object]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def model_for(server: ScriptedServer, **kw: Any) -> ModelSpec:
    return ModelSpec(id="scripted-model", base_url=server.url, key_env=KEY_ENV, **{**PRICES, **kw})


def workspace(tmp_path: Path, files: Mapping[str, bytes]) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    for name, data in files.items():
        p = ws / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    for p in [ws, *ws.rglob("*")]:  # the sandbox user (nobody) must be able to read it
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return ws


@dataclass
class Run:
    result: AgentResult
    events: list[dict[str, Any]]
    events_path: Path
    outputs: dict[str, bytes]


def run_agent(
    backend: Any,
    ws: Path,
    tmp_path: Path,
    server: ScriptedServer,
    *,
    harness: str = "dataspace-agent",
    task_id: str = "task_1",
    question: str = "Which cities?",
    limits: AgentLimits | None = None,
    settings: Mapping[str, Any] | None = None,
    inspect: Any = None,
) -> Run:
    """One attempt's agent on a fresh sandbox; ``inspect(sandbox)`` runs before close."""
    from dataspace.sandbox import Limits, SandboxSpec

    limits = limits or AgentLimits(wall_seconds=60, command_timeout=20)
    agent = get_agent(harness)
    # what the attempt runner gives the harness's sandbox (smolagents: its package folder)
    needs = agent.sandbox_needs()
    sb = backend.create(
        SandboxSpec(
            workspace=ws,
            limits=Limits(
                cpus=1,
                memory_bytes=1024**3,
                wall_seconds=limits.wall_seconds + 60,
                command_timeout=limits.command_timeout,
            ),
            runtime_binds=() if needs is None else tuple(needs.runtime_binds),
        )
    )
    ev_path = tmp_path / f"events-{time.monotonic_ns()}.jsonl"
    events = EventLog(ev_path)
    try:
        ctx = AgentContext(
            task=TaskInput(task_id=task_id, question=question),
            sandbox=sb,
            limits=limits,
            events=events,
            deadline=time.monotonic() + limits.wall_seconds,
            settings={
                "model": model_for(server),
                "run_id": "test",
                # the loop tests check the extended semantics (patient retries, notes); the
                # official profile has its own tests (test_protocol_conformance.py)
                "protocol": "extended",
                "retry": {"initial_backoff": 0.01, "max_backoff": 0.05},
                **(settings or {}),
            },
        )
        result = agent.run(ctx)
        if inspect is not None:
            inspect(sb)
        out_dir = tmp_path / f"collected-{time.monotonic_ns()}"
        files = sb.collect(out_dir)
        outputs = {str(p.relative_to(out_dir)): p.read_bytes() for p in files}
    finally:
        events.close()
        sb.close()
    recs = [json.loads(line) for line in ev_path.read_text().splitlines()]
    return Run(result=result, events=recs, events_path=ev_path, outputs=outputs)


def bash(command: str, **extra: Any) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command, **extra}}


def submit(path: str = "/output/prediction.csv") -> dict[str, Any]:
    return {"name": "submit_answer", "arguments": {"path": path}}


CITIES = _csv(
    [
        ["city", "country", "population"],
        ["Lyon", "FR", 522000],
        ["Graz", "AT", 291000],
        ["Porto", "PT", 232000],
        ["Turku", "FI", 195000],
    ]
)


def solving_script(threshold: int) -> list[dict[str, Any]]:
    """A trajectory that inspects the workspace, computes the answer and submits it."""
    program = (
        "import pandas as pd; d = pd.read_csv('/workspace/cities.csv'); "
        f"d[d.population > {threshold}][['city', 'population']]"
        ".to_csv('/output/prediction.csv', index=False)"
    )
    return [
        {"tool_calls": [bash("ls -la /workspace && head -3 /workspace/cities.csv")]},
        {
            "content": "I will compute the answer with pandas.",
            "tool_calls": [bash(f'python3 -c "{program}"')],
        },
        {"tool_calls": [bash("cat /output/prediction.csv")]},
        {"tool_calls": [submit()]},
    ]


THRESHOLDS = {"task_1": 250000, "task_2": 200000}


@contextlib.contextmanager
def counting_listener() -> Iterator[dict[str, Any]]:
    """A TCP listener on the host's 127.0.0.1 that counts the connections it accepts
    (``{"port": ..., "accepted": n}``), for tests that show a sandbox cannot reach it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    seen: dict[str, Any] = {"port": srv.getsockname()[1], "accepted": 0}
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            seen["accepted"] += 1
            conn.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield seen
    finally:
        stop.set()
        t.join(timeout=5)
        srv.close()
