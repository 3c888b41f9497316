"""smolagents running inside a real local sandbox, its model calls relayed and metered."""

from __future__ import annotations

import threading
import time

import pytest
from agents_helpers import CITIES, SECRET, run_agent, workspace

from dataspace.agents import AgentLimits
from dataspace.agents.smolagents_adapter import count_actions, install_problem, relation_prompt
from dataspace.errors import InfrastructureError

OUTAGE_WALL_SECONDS = 240  # the outage tests' attempt wall limit

pytestmark = [pytest.mark.sandbox, pytest.mark.llm]

if install_problem() is not None:  # the set-up installs it: a missing one is a failure
    pytest.fail(f"the smolagents harness is not installed: {install_problem()}")

LOOK = (
    "Thought: look at the data\n<code>\nimport pandas as pd\n"
    "df = pd.read_csv('/workspace/cities.csv')\nprint(df.shape)\n</code>"
)
WRITE = (
    "Thought: write the answer\n<code>\n"
    "df[df['population'] > 250000][['city', 'population']]"
    ".to_csv('/output/prediction.csv', index=False)\nfinal_answer('done')\n</code>"
)


def test_smolagents_solves_through_the_relay(local_backend, server, tmp_path):
    server.set_script(
        "task_1",
        [
            {"content": LOOK, "faults": [{"status": 429, "retry_after": 0.01, "times": 3}]},
            {"content": WRITE},
        ],
    )
    seen = {}

    def inspect(sb):
        pattern = f"{SECRET[:-1]}[{SECRET[-1]}]"
        res = sb.exec(["/bin/sh", "-c", f"env; grep -rl '{pattern}' /tmp /output; ls -A /output"])
        seen["out"] = res.stdout

    run = run_agent(
        local_backend,
        workspace(tmp_path, {"cities.csv": CITIES}),
        tmp_path,
        server,
        harness="smolagents",
        inspect=inspect,
    )
    r = run.result
    assert r.end_state == "submitted", r.error
    assert (r.model_turns, r.tool_actions) == (2, 2)
    assert run.outputs["prediction.csv"].decode().splitlines() == [
        "city,population",
        "Lyon,522000",
        "Graz,291000",
    ]
    assert set(run.outputs) == {"prediction.csv"}  # the harness's runtime files are gone
    rep = server.totals("task_1")
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.cached_input_tokens) == (
        rep.prompt_tokens,
        rep.completion_tokens,
        rep.cached_tokens,
    )
    assert r.usage.retries == 3 and r.usage.model_calls == 2
    # the endpoint got the key from the relay; the sandbox never saw it
    assert {
        r.headers.get("Authorization") or r.headers.get("authorization") for r in server.requests
    } == {f"Bearer {SECRET}"}
    assert {r.body["model"] for r in server.requests} == {"scripted-model"}
    assert SECRET not in seen["out"] and SECRET not in run.events_path.read_text()
    task_text = server.requests[0].body["messages"][1]["content"][0]["text"]
    assert relation_prompt("task_1", "Which cities?") in task_text


def test_smolagents_step_budget(local_backend, server, tmp_path):
    server.set_script("task_1", [{"content": LOOK}] * 6)
    run = run_agent(
        local_backend,
        workspace(tmp_path, {"cities.csv": CITIES}),
        tmp_path,
        server,
        harness="smolagents",
        limits=AgentLimits(model_turns=2, wall_seconds=60),
    )
    assert run.result.end_state == "model_turns_exhausted"
    assert run.result.model_turns <= 2 and "prediction.csv" not in run.outputs


def test_smolagents_without_prediction_is_stopped(local_backend, server, tmp_path):
    done = "Thought: done\n<code>\nfinal_answer('forty-two')\n</code>"
    server.set_script("task_1", [{"content": done}])
    run = run_agent(
        local_backend,
        workspace(tmp_path, {"cities.csv": CITIES}),
        tmp_path,
        server,
        harness="smolagents",
    )
    assert run.result.end_state == "stopped"
    assert run.result.error == "required prediction.csv was not created"


def test_count_actions_reads_tool_calls():
    trace = {
        "steps": [
            {"step_number": 1, "tool_calls": [{"id": "a"}]},
            {"plan": "x"},
            {"step_number": 2, "code_action": "print(1)"},
        ]
    }
    assert count_actions(trace) == 2


def _shell_step(thought: str, command: str) -> str:
    return (
        f"Thought: {thought}\n<code>\nimport subprocess\n"
        f"subprocess.run(['sh', '-c', {command!r}], check=True)\nfinal_answer('done')\n</code>"
    )


def test_smolagents_prediction_linked_inside_output_is_its_target(local_backend, server, tmp_path):
    """Guards a linked prediction.csv (official: its target is copied and scored) for the
    smolagents harness too, and a link out of /output being refused."""
    link = _shell_step(
        "write the answer and link it",
        "mkdir -p /output/answers && printf 'city,population\\nLyon,522000\\n' > "
        "/output/answers/final.csv && ln -s answers/final.csv /output/prediction.csv",
    )
    server.set_script("task_1", [{"content": link}])
    ws = workspace(tmp_path, {"cities.csv": CITIES})
    run = run_agent(local_backend, ws, tmp_path, server, harness="smolagents")
    assert run.result.end_state == "submitted", run.result.error
    assert run.result.submitted_path == "/output/answers/final.csv"
    assert run.outputs["answers/final.csv"] == b"city,population\nLyon,522000\n"

    out = _shell_step("link the workspace", "ln -s /workspace/cities.csv /output/prediction.csv")
    server.set_script("task_1", [{"content": out}])
    (tmp_path / "again").mkdir()
    run = run_agent(local_backend, ws, tmp_path / "again", server, harness="smolagents")
    assert run.result.end_state != "submitted"
    assert "path escapes the permitted workspace/output roots" in (run.result.error or "")


def _run_into_an_outage(local_backend, server, tmp_path, protocol: str):
    """smolagents' first call answered, its second held until the server is killed."""
    server.set_script(
        "task_1", [{"content": LOOK}, {"faults": [{"wait": "outage"}], "content": WRITE}]
    )

    # room for a slow start of smolagents in its sandbox on a loaded host: the outage comes
    # once the second call is held, however long that takes (10 s on an idle machine)
    def kill_when_held() -> None:
        deadline = time.monotonic() + OUTAGE_WALL_SECONDS
        while not server.served("task_1", 1) and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()

    killer = threading.Thread(target=kill_when_held, daemon=True)
    killer.start()
    try:
        return run_agent(
            local_backend,
            workspace(tmp_path, {"cities.csv": CITIES}),
            tmp_path,
            server,
            harness="smolagents",
            settings={
                "protocol": protocol,
                "retry": {"initial_backoff": 0.01, "max_backoff": 0.05, "max_connect_retries": 2},
            },
            limits=AgentLimits(wall_seconds=OUTAGE_WALL_SECONDS, command_timeout=20),
        )
    finally:
        killer.join(timeout=OUTAGE_WALL_SECONDS + 10)


def test_smolagents_outage_is_marked_endpoint_unreachable(local_backend, server, tmp_path):
    """Guards relayed outages (official profile): a killed endpoint ended smolagents with
    code ``model_endpoint`` and no mark; now the attempt keeps its outcome and is marked
    ``endpoint_unreachable``, its error naming the endpoint.
    """
    url = server.url
    run = _run_into_an_outage(local_backend, server, tmp_path, "official")
    r = run.result
    assert r.endpoint_unreachable, r
    assert r.end_state == "runtime_error", r  # smolagents' own end: its model call failed
    assert r.error is not None and r.error.startswith("smolagents: "), r.error
    assert url in r.error and "cannot be reached" in r.error, r.error
    assert r.usage.model_calls == 1  # the answered call is paid


def test_smolagents_outage_is_infrastructure_under_extended(local_backend, server, tmp_path):
    """Guards relayed outages (extended profile): an infrastructure fault with code
    ``endpoint_unreachable`` (it was ``model_endpoint``), so the controller marks the row.
    """
    url = server.url
    with pytest.raises(InfrastructureError) as err:
        _run_into_an_outage(local_backend, server, tmp_path, "extended")
    assert err.value.code == "endpoint_unreachable"
    assert url in str(err.value)
