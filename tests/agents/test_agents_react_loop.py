"""DataSpace-Agent against the scripted model server, in real local sandboxes."""

from __future__ import annotations

import io
import json

import pytest
from agents_helpers import (
    CITIES,
    SECRET,
    bash,
    run_agent,
    solving_script,
    submit,
    workspace,
)

from dataspace.agents import AgentLimits
from dataspace.agents._react_prompt import REMINDER, SYSTEM_PROMPT
from dataspace.llm.usage import Prices, TokenCounts, cost_usd

pytestmark = [pytest.mark.sandbox, pytest.mark.llm]


def _results(run, tool: str | None = None) -> list[dict]:
    return [
        e["result"]
        for e in run.events
        if e["type"] == "tool_result" and (tool is None or e["tool"] == tool)
    ]


def test_scripted_trajectory_submits_and_meters_exactly(local_backend, server, tmp_path):
    server.set_script("task_1", solving_script(250000))
    ws = workspace(tmp_path, {"cities.csv": CITIES})
    run = run_agent(local_backend, ws, tmp_path, server)
    r = run.result
    assert r.end_state == "submitted"
    assert r.submitted_path == "/output/prediction.csv"
    assert (r.model_turns, r.tool_actions) == (4, 4)
    assert run.outputs["prediction.csv"].decode().splitlines() == [
        "city,population",
        "Lyon,522000",
        "Graz,291000",
    ]
    rep = server.totals("task_1")
    u = r.usage
    assert (u.input_tokens, u.cached_input_tokens, u.output_tokens, u.reasoning_tokens) == (
        rep.prompt_tokens,
        rep.cached_tokens,
        rep.completion_tokens,
        rep.reasoning_tokens,
    )
    tokens = TokenCounts(
        input_tokens=u.input_tokens,
        cached_input_tokens=u.cached_input_tokens,
        output_tokens=u.output_tokens,
    )
    assert u.cost_usd == cost_usd(tokens, Prices(input=2.0, cached_input=0.5, output=8.0))
    assert u.model_calls == 4 and u.retries == 0
    first = server.requests[0].body
    assert first["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert first["max_tokens"] == 32768 and first["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in first["tools"]] == [
        "bash",
        "view_image",
        "submit_answer",
    ]
    assert "Time remaining:" in first["messages"][1]["content"]


def test_reply_without_tool_call_gets_the_reminder(local_backend, server, tmp_path):
    server.set_script(
        "task_1",
        [
            {"content": "Let me think about it."},
            {"tool_calls": [bash("echo a,b > /output/prediction.csv")]},
            {"tool_calls": [submit()]},
        ],
    )
    run = run_agent(local_backend, workspace(tmp_path, {"a.txt": b"x"}), tmp_path, server)
    assert run.result.end_state == "submitted"
    assert run.result.model_turns == 3 and run.result.tool_actions == 2
    second = server.requests[1].body["messages"]
    assert second[-1]["role"] == "user" and second[-1]["content"].startswith(REMINDER)
    assert [e["type"] for e in run.events].count("protocol_reminder") == 1


def test_malformed_tool_calls_get_error_observations(local_backend, server, tmp_path):
    server.set_script(
        "task_1",
        [
            {
                "tool_calls": [
                    {"name": "bash", "arguments": "{not json"},
                    {"name": "rm_rf", "arguments": {}},
                    {"name": "bash", "arguments": {"command": ""}},
                    {"name": "bash", "arguments": "[1, 2]"},
                ]
            },
            {
                "tool_calls": [
                    bash("printf 'a,b\\n1\\n' > /output/bad.csv"),
                    submit("/output/bad.csv"),
                    submit("/etc/passwd"),
                    submit("/output/missing.csv"),
                ]
            },
            {"tool_calls": [bash("printf 'a,b\\n1,2\\n' > /output/prediction.csv"), submit()]},
        ],
    )
    run = run_agent(local_backend, workspace(tmp_path, {"a.txt": b"x"}), tmp_path, server)
    assert run.result.end_state == "submitted"
    res = _results(run)
    assert [x["ok"] for x in res] == [
        False,
        False,
        False,
        False,
        True,
        False,
        False,
        False,
        True,
        True,
    ]
    assert "not valid JSON" in res[0]["error"]
    assert res[1]["error"] == "unknown tool: rm_rf"
    assert "must be a JSON object" in res[3]["error"]
    assert res[5]["error"] == "row 2 has 1 columns; expected 2"
    assert "must be under /workspace or /output" in res[6]["error"]
    assert res[7]["error_type"] == "FileNotFoundError"
    # every tool call was answered, in order, with its own id
    tool_msgs = [m for m in server.requests[2].body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == [
        f"call_{s}_{i}" for s, n in ((0, 4), (1, 4)) for i in range(n)
    ]


def test_model_turn_budget_ends_the_run(local_backend, server, tmp_path):
    server.set_script("task_1", [{"content": f"thinking {i}"} for i in range(10)])
    run = run_agent(
        local_backend,
        workspace(tmp_path, {"a.txt": b"x"}),
        tmp_path,
        server,
        limits=AgentLimits(model_turns=3, wall_seconds=60),
    )
    assert run.result.end_state == "model_turns_exhausted"
    assert run.result.model_turns == 3 and len(server.requests) == 3


def test_tool_action_budget_ends_the_run(local_backend, server, tmp_path):
    server.set_script("task_1", [{"tool_calls": [bash("true"), bash("true")]}] * 5)
    run = run_agent(
        local_backend,
        workspace(tmp_path, {"a.txt": b"x"}),
        tmp_path,
        server,
        limits=AgentLimits(tool_actions=3, wall_seconds=60),
    )
    assert run.result.end_state == "tool_actions_exhausted"
    assert run.result.tool_actions == 3 and run.result.model_turns == 2


def test_wall_clock_budget_ends_the_run(local_backend, server, tmp_path):
    server.set_script("task_1", [{"tool_calls": [bash("sleep 1")]}] * 10)
    run = run_agent(
        local_backend,
        workspace(tmp_path, {"a.txt": b"x"}),
        tmp_path,
        server,
        limits=AgentLimits(wall_seconds=2.5, command_timeout=30),
    )
    assert run.result.end_state == "wall_time_exhausted"
    assert 1 <= run.result.tool_actions <= 3


def test_command_timeout_kills_the_command_and_the_run_goes_on(local_backend, server, tmp_path):
    server.set_script(
        "task_1",
        [
            {"tool_calls": [bash("sleep 30; echo late", timeout=100)]},
            {"tool_calls": [bash("echo a > /output/prediction.csv"), submit()]},
        ],
    )
    run = run_agent(
        local_backend,
        workspace(tmp_path, {"a.txt": b"x"}),
        tmp_path,
        server,
        limits=AgentLimits(wall_seconds=60, command_timeout=1),
    )
    first = _results(run, "bash")[0]
    assert first["timed_out"] is True and first["ok"] is False and "late" not in first["stdout"]
    assert first["duration_seconds"] < 10
    assert run.result.end_state == "submitted"


def test_retry_storm_costs_no_turns_and_no_working_time(local_backend, server, tmp_path):
    script = solving_script(250000)
    for step in script:
        step["faults"] = [
            {"status": 429, "retry_after": 0.02, "times": 4},
            {"status": 503, "times": 1},
            {"malformed": "not_json", "times": 1},
            {"malformed": "no_choices", "times": 1},
        ]
    server.set_script("task_1", script)
    ws = workspace(tmp_path, {"cities.csv": CITIES})
    run = run_agent(local_backend, ws, tmp_path, server)
    r = run.result
    assert r.end_state == "submitted" and r.model_turns == 4
    assert r.usage.retries == 4 * 7 and r.usage.retry_seconds > 4 * 4 * 0.02
    rep = server.totals("task_1")
    assert rep.faults == 28 and rep.replies == 4
    assert r.usage.input_tokens == rep.prompt_tokens
    assert r.usage.output_tokens == rep.completion_tokens
    assert r.working_seconds < sum(e["t"] for e in run.events if e["type"] == "agent_end")
    retries = [e for e in run.events if e["type"] == "model_retry"]
    assert len(retries) == 28 and {e["delay_seconds"] for e in retries[:4]} == {0.02}


def test_view_image_resizes_to_the_long_edge(local_backend, server, tmp_path):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (3200, 800), (10, 200, 30)).save(buf, format="PNG")
    server.set_script(
        "task_1",
        [
            {
                "tool_calls": [
                    {"name": "view_image", "arguments": {"path": "/workspace/chart.png"}},
                    {"name": "view_image", "arguments": {"path": "/workspace/a.txt"}},
                ]
            },
            {"tool_calls": [bash("echo a > /output/prediction.csv"), submit()]},
        ],
    )
    ws = workspace(tmp_path, {"chart.png": buf.getvalue(), "a.txt": b"not an image"})
    run = run_agent(local_backend, ws, tmp_path, server)
    ok, bad = _results(run, "view_image")
    assert ok["image"]["normalized_width"] == 1600 and ok["image"]["normalized_height"] == 400
    assert ok["image"]["encoding"] == "image/jpeg" and ok["image"]["jpeg_quality"] == 90
    assert bad["ok"] is False and bad["error_type"] == "UnidentifiedImageError"  # as official
    msgs = server.requests[1].body["messages"]
    assert msgs[-1]["role"] == "user"
    assert msgs[-1]["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert [m["role"] for m in msgs[-4:]] == ["assistant", "tool", "tool", "user"]
    # the image the model saw is in the trace once, as an image event of its call (the
    # trace page shows it inline), and nowhere else
    assert run.events_path.read_text().count("base64,") == 1
    images = [e for e in run.events if e["type"] == "image"]
    assert len(images) == 1 and images[0]["data_url"].startswith("data:image/jpeg;base64,")
    assert images[0]["path"] == "/workspace/chart.png"


def test_long_output_keeps_first_two_thirds_and_last_third(local_backend, server, tmp_path):
    server.set_script(
        "task_1",
        [
            {"tool_calls": [bash("python3 -c \"print('A' * 40000 + 'Z' * 20000)\"")]},
            {"tool_calls": [bash("echo a > /output/prediction.csv"), submit()]},
        ],
    )
    run = run_agent(local_backend, workspace(tmp_path, {"a.txt": b"x"}), tmp_path, server)
    out = _results(run, "bash")[0]
    assert out["stdout_truncated"] is True
    # 60,001 characters (with print's newline): 13,333 kept, 40,001 cut, 6,667 kept
    assert out["stdout"] == (
        "A" * 13333 + "\n... [40001 characters truncated] ...\n" + "Z" * 6666 + "\n"
    )


def test_the_key_never_reaches_the_sandbox_or_the_trace(local_backend, server, tmp_path):
    # the pattern matches the key without spelling it, so the command itself holds no key
    pattern = f"{SECRET[:-1]}[{SECRET[-1]}]"
    hunt = (
        "env; cat /proc/self/environ /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; "
        f"grep -rl '{pattern}' /tmp /output /workspace /proc/self/environ; echo done"
    )
    server.set_script(
        "task_1",
        [
            {"tool_calls": [bash(hunt)]},
            {
                "tool_calls": [
                    bash("env > /output/env.txt; echo a > /output/prediction.csv"),
                    submit(),
                ]
            },
        ],
    )
    seen: dict[str, str] = {}

    def inspect(sb):
        res = sb.exec(["/bin/sh", "-c", f"env; grep -rl '{pattern}' /tmp /output /workspace; true"])
        seen["env"] = res.stdout + res.stderr

    run = run_agent(
        local_backend, workspace(tmp_path, {"a.txt": b"x"}), tmp_path, server, inspect=inspect
    )
    assert run.result.end_state == "submitted"
    assert SECRET not in json.dumps(_results(run))
    assert SECRET not in run.events_path.read_text()
    assert all(SECRET.encode() not in data for data in run.outputs.values())
    assert SECRET not in seen["env"]
    # ... while the endpoint did get it, from the controller
    auth = {
        r.headers.get("Authorization") or r.headers.get("authorization") for r in server.requests
    }
    assert auth == {f"Bearer {SECRET}"}


def test_cancel_stops_the_run(local_backend, server, tmp_path):
    from dataspace.agents.dataspace_agent import DataSpaceAgent

    agent = DataSpaceAgent()
    agent.cancel()
    server.set_script("task_1", [{"tool_calls": [bash("true")]}])
    ws = workspace(tmp_path, {"a.txt": b"x"})
    from dataspace.agents import AgentContext
    from dataspace.release import TaskInput
    from dataspace.sandbox import SandboxSpec
    from dataspace.traces import EventLog

    sb = local_backend.create(SandboxSpec(workspace=ws))
    try:
        import time

        from agents_helpers import model_for

        ev = EventLog(tmp_path / "ev.jsonl")
        res = agent.run(
            AgentContext(
                task=TaskInput(task_id="task_1", question="q"),
                sandbox=sb,
                limits=AgentLimits(),
                events=ev,
                deadline=time.monotonic() + 60,
                settings={"model": model_for(server)},
            )
        )
        ev.close()
    finally:
        sb.close()
    assert res.end_state == "stopped" and res.model_turns == 0 and server.requests == []
