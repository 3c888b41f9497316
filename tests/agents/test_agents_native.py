"""The real Codex and Claude Code CLIs inside the local sandbox, behind the per-wire relays.

Each attempt runs the pinned binary (installed by ``scripts/dev.sh``) against the scripted
Responses or Messages server. Every scripted trajectory starts with a probe command that
the harness itself runs inside the sandbox: it looks for the real key in every process's
environment and in every file the sandbox can see (the harness's home and logs included),
tries to reach a listener on the host's 127.0.0.1 and to write to the workspace, and
prints what it found; the probe's output comes back through the harness's own trace.
(Three demo tasks solved by each CLI through the whole run path are in
``test_agents_harness_comparison.py``.)
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents_helpers import KEY_ENV, PRICES, SECRET, counting_listener

from dataspace.agents import AgentContext, AgentLimits, get_agent
from dataspace.agents.native.install import harness_state
from dataspace.llm.models import ModelSpec
from dataspace.release import TaskInput
from dataspace.testing.scripted_wire import ScriptedMessagesServer, ScriptedResponsesServer
from dataspace.traces import EventLog

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration, pytest.mark.slow]

SERVERS = {"codex": ScriptedResponsesServer, "claude-code": ScriptedMessagesServer}
HALF = len(SECRET) // 2
PRED = "/output/prediction.csv"


def _installed(name: str) -> None:
    state = harness_state(name)
    if not state.ready:
        pytest.skip(f"{name} {state.pinned} is not installed ({state.problem}); {state.fix}")


@pytest.fixture(params=["codex", "claude-code"])
def harness(request: pytest.FixtureRequest) -> str:
    _installed(request.param)
    return str(request.param)


@pytest.fixture
def host_listener() -> Iterator[dict[str, Any]]:
    """A TCP listener on the host's 127.0.0.1 that counts the connections it accepts."""
    with counting_listener() as seen:
        yield seen


def probe(port: int) -> str:
    """The probe command (the key is assembled from halves: it never appears in a script)."""
    return (
        f"A='{SECRET[:HALF]}'; B='{SECRET[HALF:]}'; k=\"$A$B\"; "
        "n1=$( (env; cat /proc/[0-9]*/environ | tr '\\0' '\\n') 2>/dev/null | grep -cF \"$k\"); "
        'n2=$(grep -rlF "$k" /output /tmp /run /workspace 2>/dev/null | wc -l); '
        'net=$(python3 -c "import socket; s=socket.socket(); s.settimeout(5)\n'
        "try:\n    s.connect(('127.0.0.1', " + str(port) + "))\n    print('open')\n"
        "except OSError:\n    print('refused')\"); "
        "ws=$( (echo x > /workspace/probe) 2>/dev/null && echo writable || echo readonly); "
        'echo "PROBE key_hits=$((n1 + n2)) host_net=$net workspace=$ws"'
    )


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _run_direct(
    harness: str,
    local_backend: Any,
    tmp_path: Path,
    server: Any,
    wall: float,
    inspect: Any = None,
    settings: dict[str, Any] | None = None,
    agent: Any = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """One attempt's agent on a sandbox with the relay folder, outside the run loop."""
    import os

    from dataspace.sandbox import Limits, SandboxSpec

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "cities.csv").write_text("city,population\nLyon,522000\n")
    for p in (ws, ws / "cities.csv"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    relay_dir = tmp_path / "relay"
    relay_dir.mkdir(mode=0o755)
    agent = agent or get_agent(harness)
    needs = agent.sandbox_needs()
    sb = local_backend.create(
        SandboxSpec(
            workspace=ws,
            limits=Limits(cpus=2, memory_bytes=4 * 1024**3, pids=512, wall_seconds=wall + 120),
            relay_dir=str(relay_dir),
            runtime_binds=needs.runtime_binds,
        )
    )
    events = EventLog(tmp_path / "events.jsonl")
    try:
        model = ModelSpec(id="backbone-model", base_url=server.url, key_env=KEY_ENV, **PRICES)
        ctx = AgentContext(
            task=TaskInput(task_id="task_1", question="Which cities?"),
            sandbox=sb,
            limits=AgentLimits(wall_seconds=wall, command_timeout=wall),
            events=events,
            deadline=time.monotonic() + wall,
            settings={"model": model, **(settings or {})},
            relay_dir=relay_dir,
        )
        result = agent.run(ctx)
        if inspect is not None:
            inspect(sb)
    finally:
        events.close()
        sb.close()
    return result, _events(tmp_path / "events.jsonl")


def test_a_trajectory_without_prediction_ends_no_prediction(
    harness, local_backend, tmp_path, host_listener
):
    script = [{"shell": probe(host_listener["port"])}, {"content": "The answer is Lyon."}]
    with SERVERS[harness]({"task_1": script}) as srv:
        result, events = _run_direct(harness, local_backend, tmp_path, srv, wall=240)
    assert result.end_state == "no_prediction", result.error
    assert result.error == "required prediction.csv was not created"
    trace = json.dumps(events)
    assert "PROBE key_hits=0 host_net=refused workspace=readonly" in trace
    assert SECRET not in trace and host_listener["accepted"] == 0
    rep = srv.totals("task_1")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        rep.prompt_tokens,
        rep.completion_tokens,
    )


def test_past_the_deadline_ends_wall_time_exhausted_with_nothing_left(
    harness, local_backend, tmp_path, host_listener
):
    """SIGTERM to the CLI's group at the deadline, SIGKILL after the grace; an escaped
    daemon is gone too. (The CLI reaches its third call in about 7 s on a busy 2-core
    machine: the deadline falls while that call is held.)"""
    wall = 25
    script = [
        {"shell": probe(host_listener["port"])},
        {"shell": "setsid nohup sleep 1000 >/dev/null 2>&1 < /dev/null & echo started"},
        {"content": "thinking", "delay": 120},
    ]
    left: dict[str, str] = {}

    def inspect(sb: Any) -> None:
        res = sb.exec(["/bin/sh", "-c", "for p in /proc/[0-9]*; do cat $p/comm; done"])
        left["comm"] = res.stdout

    with SERVERS[harness]({"task_1": script}) as srv:
        t0 = time.monotonic()
        result, events = _run_direct(
            harness,
            local_backend,
            tmp_path,
            srv,
            wall=wall,
            inspect=inspect,
            settings={"grace_seconds": 2},
        )
        took = time.monotonic() - t0
        held = srv.served("task_1", 2)
    assert held == 1, "the deadline fell before the CLI's third call"
    assert result.end_state == "wall_time_exhausted", result.error
    assert took < wall + 60
    out = next(e for e in events if e["type"] == "harness_output")
    assert out["timed_out"] is True and out["signal"] in ("SIGTERM", "SIGKILL")
    names = set(left["comm"].split())
    assert not names & {"sleep", "codex", "claude", "bash"}, left["comm"]
    trace = json.dumps(events)
    assert "PROBE key_hits=0 host_net=refused workspace=readonly" in trace
    assert SECRET not in trace and host_listener["accepted"] == 0


def test_a_reply_from_another_model_fails_validation(local_backend, tmp_path):
    """Claude Code's trace shows the model that answered; the official validator fails it."""
    _installed("claude-code")
    script = [
        {"shell": "echo a,b > /output/prediction.csv"},
        {"content": "done", "reply_model": "claude-haiku-4-5"},
    ]
    with ScriptedMessagesServer({"task_1": script}) as srv:
        result, _ = _run_direct("claude-code", local_backend, tmp_path, srv, wall=240)
    assert result.end_state == "runtime_error"
    assert "claude-haiku-4-5" in (result.error or "") and "single-backbone" in (result.error or "")


def test_a_missing_binary_is_a_runtime_error_with_the_fix(local_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("DATASPACE_HARNESS_ROOT", str(tmp_path / "nowhere"))
    with ScriptedResponsesServer({}) as srv:
        result, _ = _run_direct("codex", local_backend, tmp_path, srv, wall=30)
    assert result.end_state == "runtime_error"
    assert "codex 0.145.0 is not installed" in (result.error or "")
    assert "dataspace.agents.native.install codex" in (result.error or "")


def test_cancel_stops_the_cli_and_ends_stopped(local_backend, tmp_path):
    """Cancelling a run (Ctrl-C on the controller) ends a live CLI with ``stopped``."""
    _installed("codex")
    from dataspace.agents.native.codex import CodexAgent

    agent = CodexAgent()
    script = [{"shell": "echo started"}, {"content": "thinking", "delay": 120}]
    with ScriptedResponsesServer({"task_1": script}) as srv:

        def cancel_when_waiting() -> None:
            deadline = time.monotonic() + 120
            while srv.served("task_1", 1) == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            agent.cancel()

        watcher = threading.Thread(target=cancel_when_waiting, daemon=True)
        watcher.start()
        t0 = time.monotonic()
        result, events = _run_direct("codex", local_backend, tmp_path, srv, wall=300, agent=agent)
        watcher.join(timeout=10)
    assert result.end_state == "stopped" and time.monotonic() - t0 < 100
    out = next(e for e in events if e["type"] == "harness_output")
    assert out["signal"] in ("SIGTERM", "SIGKILL") and out["timed_out"] is False


def test_codex_against_a_dead_endpoint_is_marked_endpoint_unreachable(local_backend, tmp_path):
    """Guards relayed outages of the native CLIs: Codex retrying into an endpoint where
    nothing listens ended with code ``model_endpoint`` and no mark; under the official
    profile it keeps its own end state and is marked ``endpoint_unreachable``, the error
    naming the endpoint.
    """
    _installed("codex")
    with socket.socket() as dead:  # bound, never listening: connections are refused
        dead.bind(("127.0.0.1", 0))
        upstream = SimpleNamespace(url=f"http://127.0.0.1:{dead.getsockname()[1]}/v1")
        result, events = _run_direct(
            "codex", local_backend, tmp_path, upstream, wall=120, settings={"protocol": "official"}
        )
    assert result.endpoint_unreachable, result
    assert result.end_state == "runtime_error", result  # Codex exits non-zero: its own end
    netloc = upstream.url.removeprefix("http://").removesuffix("/v1")
    assert result.error is not None and result.error.startswith("codex: "), result.error
    assert f"model endpoint {netloc} unreachable" in result.error, result.error
    assert result.usage.model_calls == 0
    end = next(e for e in events if e["type"] == "agent_end")
    assert end["end_state"] == result.end_state and end["error"] == result.error
