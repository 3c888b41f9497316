"""Grok Build: its adapter and relay path up to the binary, and end to end when installed.

Grok Build is not on a package registry, so the end-to-end test needs a binary the user
installed (``python -m dataspace.agents.native.install grok-build --from PATH``) and skips
with that reason otherwise. The relay-path test runs everything but the binary: the
generated ``config.toml`` and environment, the sandbox's loopback forwarder, the
Chat Completions relay with the finish-reason fix, the scripted server; in place of
``grok`` a small client reads the generated config exactly where Grok reads it (its
``base_url`` and the variable its ``env_key`` names) and plays one tool-calling turn.
"""

from __future__ import annotations

import base64
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from agents_helpers import KEY_ENV, PRICES, SECRET

from dataspace.agents import AgentContext, AgentLimits
from dataspace.agents.native.grok_build import GrokBuildAgent
from dataspace.agents.native.install import harness_state
from dataspace.agents.native.runner import Plan
from dataspace.llm.models import ModelSpec
from dataspace.release import TaskInput
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.traces import EventLog

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration]

CLIENT = r"""
import json, os, subprocess, sys, tomllib, urllib.request
home = os.environ["GROK_HOME"]
cfg = tomllib.load(open(home + "/config.toml", "rb"))
entry = cfg["model"][cfg["models"]["default"]]
token = os.environ[entry["env_key"]]
messages = [{"role": "user", "content": sys.argv[1]}]
turns = 0
while True:
    req = urllib.request.Request(
        entry["base_url"] + "/chat/completions",
        data=json.dumps({"model": entry["model"], "messages": messages, "stream": False,
                         "max_tokens": entry["max_completion_tokens"]}).encode(),
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    reply = json.load(urllib.request.urlopen(req, timeout=60))
    turns += 1
    msg = reply["choices"][0]["message"]
    messages.append(msg)
    if not msg.get("tool_calls"):
        break
    for call in msg["tool_calls"]:
        cmd = json.loads(call["function"]["arguments"])["command"]
        out = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True).stdout
        print(json.dumps({"type": "tool", "output": out}), flush=True)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": out})
print(json.dumps({"type": "end", "num_turns": turns}))
"""


class _ClientInPlaceOfGrok(GrokBuildAgent):
    def command(self, plan: Plan) -> list[str]:
        super().command(plan)  # the real argv is still built (and validated)
        return ["python3", "-I", "-c", CLIENT, plan.prompt]


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "cities.csv").write_text("city,population\nLyon,522000\n")
    for p in (ws, ws / "cities.csv"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return ws


def _run(agent: Any, local_backend: Any, tmp_path: Path, server: Any) -> tuple[Any, str]:
    from dataspace.sandbox import Limits, SandboxSpec

    relay_dir = tmp_path / "relay"
    relay_dir.mkdir(mode=0o755)
    sb = local_backend.create(
        SandboxSpec(
            workspace=_workspace(tmp_path),
            limits=Limits(wall_seconds=400),
            relay_dir=str(relay_dir),
            runtime_binds=agent.sandbox_needs().runtime_binds,
        )
    )
    events = EventLog(tmp_path / "events.jsonl")
    try:
        ctx = AgentContext(
            task=TaskInput(task_id="task_1", question="Which cities?"),
            sandbox=sb,
            limits=AgentLimits(wall_seconds=240),
            events=events,
            deadline=time.monotonic() + 240,
            settings={
                "model": ModelSpec(
                    id="backbone-model", base_url=server.url, key_env=KEY_ENV, **PRICES
                )
            },
            relay_dir=relay_dir,
        )
        result = agent.run(ctx)
    finally:
        events.close()
        sb.close()
    return result, (tmp_path / "events.jsonl").read_text()


def _script() -> list[dict[str, Any]]:
    answer = base64.b64encode(b"city,population\nLyon,522000\n").decode()
    return [
        {
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {
                        "command": f"echo {answer} | base64 -d > /output/prediction.csv; "
                        "env | grep -c DATASPACE_RELAY_TOKEN"
                    },
                }
            ]
        },
        {"content": "done"},
    ]


def test_grok_build_relay_path_up_to_the_binary(local_backend, tmp_path, monkeypatch):
    root = tmp_path / "harnesses"
    stand_in = root / "grok-build" / "bin" / "grok"
    stand_in.parent.mkdir(parents=True)
    stand_in.write_text("#!/bin/sh\necho 'grok 0.2.106 (stand-in for the relay-path test)'\n")
    stand_in.chmod(0o755)
    monkeypatch.setenv("DATASPACE_HARNESS_ROOT", str(root))
    with ScriptedServer({"task_1": _script()}) as srv:
        result, trace = _run(_ClientInPlaceOfGrok(), local_backend, tmp_path, srv)
    assert result.end_state == "submitted", result.error
    rep = srv.totals("task_1")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        rep.prompt_tokens,
        rep.completion_tokens,
    )
    assert result.model_turns == 2 and SECRET not in trace
    assert all(r.body["model"] == "backbone-model" for r in srv.requests)
    assert all(SECRET in r.headers.get("Authorization", "") for r in srv.requests)
    start = next(json.loads(x) for x in trace.splitlines() if '"agent_start"' in x)
    assert start["harness_config"]["finish_reason_normalization"] is True
    assert set(start["harness_config"]["files"]) == {".grok/config.toml", ".grok/sandbox.toml"}


def test_grok_build_end_to_end_with_the_installed_binary(local_backend, tmp_path):
    state = harness_state("grok-build")
    if not state.ready:
        pytest.skip(
            f"Grok Build {state.pinned} is not installed ({state.problem}): it is not on a "
            "package registry; install it with x.ai's installer and "
            "`python -m dataspace.agents.native.install grok-build --from PATH`"
        )
    answer = base64.b64encode(b"city,population\nLyon,522000\n").decode()
    script = [{"shell": f"echo {answer} | base64 -d > /output/prediction.csv"}, {"content": "ok"}]
    with ScriptedServer({"task_1": script}) as srv:
        result, trace = _run(GrokBuildAgent(), local_backend, tmp_path, srv)
    assert result.end_state == "submitted", result.error
    assert SECRET not in trace
