"""Attempts in the docker backend's containers against the scripted model servers.

DataSpace-Agent's loop (its tools run by ``docker exec``) and the real Codex CLI behind its
relay, whose Unix socket is bound into the container (``--network none``: the CLI reaches
its model through the socket alone). The Codex trajectory starts with the probe of
``test_agents_native.py``: no key in any process's environment or file, no route to a
listener on the host's 127.0.0.1, a read-only workspace. An attempt whose agent leaves a
process behind that rewrites the answer after the submit is stored and scored as submitted
(the local backend's ``test_agents_hardening.py`` case). Skipped, with the reason, where no
Docker daemon answers or the runtime image is missing.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from agents_helpers import (
    CITIES,
    SECRET,
    bash,
    model_for,
    run_agent,
    solving_script,
    submit,
    workspace,
)
from test_agents_native import SERVERS, _installed, _run_direct, probe
from test_agents_native import host_listener as host_listener

from dataspace.agents import register_harness
from dataspace.agents.dataspace_agent import DataSpaceAgent
from dataspace.errors import SandboxError
from dataspace.runs.attempt import AttemptRequest, run_attempt
from dataspace.runs.spec import AgentSpec, Limits, SandboxConfig
from dataspace.store import open_store
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration]


@pytest.fixture(scope="module")
def docker_backend() -> Any:
    """The docker backend, or a skip saying why this host cannot run it."""
    from dataspace.sandbox import get_backend

    try:
        backend = get_backend("docker")
        backend.runtime_identity({}, None)  # the runtime image is there
    except SandboxError as exc:
        pytest.skip(f"docker sandbox backend unavailable here: {exc}")
    return backend


def test_dataspace_agent_solves_a_task_in_a_container(docker_backend, server, tmp_path) -> None:
    server.set_script("task_1", solving_script(250000))
    ws = workspace(tmp_path, {"cities.csv": CITIES})
    seen: dict[str, object] = {}
    run = run_agent(docker_backend, ws, tmp_path, server, inspect=lambda sb: seen.update(sb.info()))
    assert run.result.end_state == "submitted", run.result.error
    assert run.outputs["prediction.csv"].decode().splitlines() == [
        "city,population",
        "Lyon,522000",
        "Graz,291000",
    ]
    assert (run.result.model_turns, run.result.tool_actions) == (4, 4)
    assert seen["backend"] == "docker" and seen["network"] == "none"


@pytest.mark.slow
def test_codex_answers_through_the_relay_socket_in_a_container(
    docker_backend, tmp_path, host_listener
) -> None:
    _installed("codex")
    script = [
        {"shell": probe(host_listener["port"])},
        {"shell": "printf 'city\\nLyon\\n' > /output/prediction.csv"},
        {"content": "The answer is in /output/prediction.csv."},
    ]
    with SERVERS["codex"]({"task_1": script}) as srv:
        result, events = _run_direct(
            "codex", docker_backend, tmp_path, srv, wall=240, inspect=_is_docker
        )
    assert result.end_state == "submitted", result.error
    trace = json.dumps(events)
    assert "PROBE key_hits=0 host_net=refused workspace=readonly" in trace
    assert SECRET not in trace and host_listener["accepted"] == 0
    rep = srv.totals("task_1")
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        rep.prompt_tokens,
        rep.completion_tokens,
    )


def _is_docker(sb: Any) -> None:
    info = sb.info()
    assert info["backend"] == "docker" and info["network"] == "none + relay socket"


# -- a process the agent left behind rewrites its answer after the submit -------------------

ANSWER = b"city,population\nLyon,522000\nGraz,291000\n"
REWRITTEN = b"city,population\nWRONG,1\n"
LEAVE_BEHIND = (
    "printf 'city,population\\nLyon,522000\\nGraz,291000\\n' > /output/prediction.csv; "
    "(while [ ! -e /tmp/submitted ]; do sleep 0.05; done; "
    "printf 'city,population\\nWRONG,1\\n' > /output/prediction.csv; touch /tmp/rewritten) "
    "< /dev/null > /dev/null 2>&1 &"
)
SEEN: dict[str, bytes] = {}


class LeavingAgent(DataSpaceAgent):
    """DataSpace-Agent whose first command leaves a process behind in the container; once
    the agent has submitted, that process rewrites the answer file."""

    name = "leaving-agent"

    def run(self, ctx: Any) -> Any:
        result = super().run(ctx)
        woken = ctx.sandbox.exec(
            "touch /tmp/submitted; "
            "for _ in $(seq 1200); do [ -e /tmp/rewritten ] && exec cat /output/prediction.csv; "
            "sleep 0.05; done; exit 1",
            timeout=120,
        )
        assert woken.exit_code == 0, woken
        SEEN["after"] = woken.stdout.encode()
        return result


@pytest.mark.parametrize("protocol", ["official", "extended"])
def test_an_answer_rewritten_after_the_submit_is_not_what_is_stored(
    protocol: str, docker_backend: Any, tiny_release: Path, tmp_path: Path
) -> None:
    """Guards the stored/scored prediction of a docker attempt differing from the one
    submit_answer accepted, when a process the agent started rewrites it afterwards."""
    register_harness("leaving-agent", f"{__name__}:LeavingAgent")
    SEEN.clear()
    script = [{"tool_calls": [bash(LEAVE_BEHIND)]}, {"tool_calls": [submit()]}]
    with ScriptedServer({"task_1": script}) as srv:
        row = run_attempt(
            AttemptRequest(
                run_id="leave",
                store_uri=f"file://{tmp_path / 'store'}",
                release_root=str(tiny_release),
                agent=AgentSpec(name="a", harness="leaving-agent", model=model_for(srv)),
                task_id="task_1",
                attempt=1,
                key="k1",
                limits=Limits(wall_seconds=240, command_timeout=60, memory_bytes=1024**3),
                sandbox=SandboxConfig(backend="docker"),
                submitted_at=time.time(),
                protocol=protocol,
            )
        )
    assert SEEN["after"] == REWRITTEN  # the process did rewrite the file in the container
    assert row["status"] == "submitted" and row["passed"] is True, row
    store = open_store(f"file://{tmp_path / 'store'}")
    stored = [k for k in store.list("") if k.endswith("output/prediction.csv")]
    assert stored and all(store.get_bytes(k) == ANSWER for k in stored)
    meta = json.loads(next(store.get_bytes(k) for k in store.list("") if k.endswith("run.json")))
    assert meta["scored_sha256"] == hashlib.sha256(ANSWER).hexdigest()
    assert meta["sandbox"]["backend"] == "docker"
