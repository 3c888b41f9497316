"""Attempts in the docker backend's containers against the scripted model servers.

DataSpace-Agent's loop (its tools run by ``docker exec``) and the real Codex CLI behind its
relay, whose Unix socket is bound into the container (``--network none``: the CLI reaches
its model through the socket alone). The Codex trajectory starts with the probe of
``test_agents_native.py``: no key in any process's environment or file, no route to a
listener on the host's 127.0.0.1, a read-only workspace. Skipped, with the reason, where no
Docker daemon answers or the runtime image is missing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents_helpers import CITIES, SECRET, run_agent, solving_script, workspace
from test_agents_native import SERVERS, _installed, _run_direct, probe
from test_agents_native import host_listener as host_listener

from dataspace.errors import SandboxError

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
