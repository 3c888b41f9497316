"""Native CLI logs read in the trace schema: relay calls and the CLI's own stream as turns.

The two logs under ``tests/fixtures/traces/`` are real: recorded from the real Codex 0.145.0
and Claude Code 2.1.217 binaries solving a task inside the local sandbox against the
scripted Responses and Messages servers (``tests/report/test_report_real_traces.py`` makes
the same attempts and checks their pages in Chromium). The chat wire, which Grok Build
speaks and for which no binary is installed here, goes through a real ``WireRelay``.
"""

from __future__ import annotations

import gzip
import http.client
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from dataspace.llm.models import ModelSpec
from dataspace.llm.wire_relay import WireRelay
from dataspace.report.conversation import conversation
from dataspace.report.native_trace import native_events
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.traces import USAGE_FIELDS, AgentStart, EventLog, read_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _log(name: str) -> list[dict[str, Any]]:
    return read_events(gzip.decompress((FIXTURES / f"{name}.events.jsonl.gz").read_bytes()))


def _totals_equal_the_attempt(conv: dict[str, Any], events: list[dict[str, Any]]) -> None:
    end = next(e for e in events if e["type"] == "agent_end")["usage"]
    for k in USAGE_FIELDS:
        assert conv["totals"][k] == pytest.approx(end[k]), k


def test_a_codex_log_reads_as_three_turns():
    events = _log("codex")
    conv = conversation(events)
    assert conv["harness"] == "codex"
    assert conv["system_prompt"].startswith("You are a coding agent running in the Codex CLI")
    assert "Task ID: task_1" in conv["user_prompt"]
    assert [t["content"] for t in conv["turns"]] == [
        "Let me look at the workspace first.",
        None,
        "prediction.csv is written: Lyon and Graz.",
    ]
    first, second = (t["tool_calls"][0] for t in conv["turns"][:2])
    assert first["name"] == second["name"] == "exec_command"
    assert first["arguments"]["cmd"] == "ls /workspace && head -3 /workspace/cities.csv"
    # the output the model saw (the next request's function_call_output), and the exit
    # code from codex's own command_execution item
    assert "Lyon,XX,522000" in first["output"] and first["exit_code"] == 0
    assert "Graz,291000" in second["output"] and second["exit_code"] == 0
    _totals_equal_the_attempt(conv, events)
    assert all(t["latency_seconds"] is not None for t in conv["turns"])
    kinds = [i["kind"] for i in conv["items"]]
    assert kinds == ["turn", "turn", "turn", "warning", "stream"]  # codex's metadata notice
    assert conv["counts"]["errors"] == 0 and conv["counts"]["tool_calls"] == 2
    assert conv["end"]["end_state"] == "submitted"


def test_a_claude_code_log_reads_as_three_turns_with_its_retry():
    events = _log("claude-code")
    conv = conversation(events)
    assert "Claude" in conv["system_prompt"]
    assert conv["counts"]["turns"] == 3 and conv["counts"]["retries"] == 1
    assert len(conv["turns"][0]["retries"]) == 1
    assert "HTTP 429" in conv["turns"][0]["retries"][0]["error"]
    first, second = (t["tool_calls"][0] for t in conv["turns"][:2])
    assert first["name"] == "Bash" and first["arguments"]["command"].startswith("ls /workspace")
    assert first["id"].startswith("toolu_")
    assert first["output"].endswith("Lyon,XX,522000\nGraz,XX,291000")
    assert "Graz,291000" in second["output"]
    _totals_equal_the_attempt(conv, events)


def test_tool_outputs_come_from_the_requests_when_the_stream_is_lost():
    """A CLI killed before it printed its stream still shows what the model saw."""
    for name in ("codex", "claude-code"):
        events = [e for e in _log(name) if e["type"] != "harness_output"]
        conv = conversation(events)
        first = conv["turns"][0]["tool_calls"][0]
        assert "Lyon,XX,522000" in first["output"], name
        assert conv["counts"]["turns"] == 3


def test_a_cut_reply_and_a_refused_model_are_shown_not_fatal():
    events = _log("claude-code")
    calls = [e for e in events if e["type"] == "model_call" and e["status"] == 200]
    calls[0]["raw"] = calls[0]["raw"][: len(calls[0]["raw"]) // 3]
    calls[1]["request"] = "{not json"
    events.insert(3, {"t": 1.0, "type": "model_refused", "model": "claude-haiku", "allowed": "m"})
    conv = conversation(events)
    assert conv["counts"]["turns"] == 3 and conv["counts"]["errors"] == 1
    assert any("claude-haiku" in (i.get("text") or "") for i in conv["items"])
    _totals_equal_the_attempt(conv, events)


def test_a_log_of_our_own_harnesses_is_left_alone():
    log = [
        {"t": 0, "type": "attempt_start", "schema": "dataspace.trace/1"},
        {"t": 1, "type": "model_call", "input_tokens": 3},
        {"t": 1, "type": "model_turn", "turn": 1, "content": "hi"},
    ]
    assert native_events(log) == log


def test_a_streamed_chat_reply_is_parsed():
    chunks = [
        {"id": "c1", "model": "m", "choices": [{"delta": {"content": "Let me "}}]},
        {"choices": [{"delta": {"content": "look.", "reasoning_content": "think"}}]},
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "call_9", "function": {"name": "bash"}},
                        ]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"c": 1}'}}]},
                    "finish_reason": "tool_calls",
                }
            ]
        },
    ]
    raw = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    log = [
        {"t": 0, "type": "agent_start", "harness": "grok-build"},
        {"t": 1, "type": "model_call", "wire": "chat", "status": 200, "raw": raw, "seconds": 0.5},
    ]
    turn = conversation(log)["turns"][0]
    assert turn["content"] == "Let me look." and turn["reasoning"] == "think"
    assert turn["tool_calls"][0]["id"] == "call_9"
    assert turn["tool_calls"][0]["arguments"] == {"c": 1}
    assert turn["latency_seconds"] == 0.5


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def test_the_chat_wire_through_a_real_relay(tmp_path):
    """Grok Build's path (Chat Completions behind the relay), with a client standing in
    for the binary that is not installed here."""
    script = [
        {"content": "Looking.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
        {"content": "Done."},
    ]
    sock = tmp_path / "relay.sock"
    with ScriptedServer({"task_7": script}) as srv:
        model = ModelSpec(id="backbone", base_url=srv.url, key_env=None, price_input=1.0)
        events = EventLog(tmp_path / "events.jsonl")
        events.emit(AgentStart(harness="grok-build", wire="chat"))  # as the runner does
        with WireRelay(
            wire="chat", model=model, upstream_base=srv.url, events=events, api_key="k"
        ) as relay:
            relay.serve_unix(sock)
            messages: list[dict[str, Any]] = [
                {"role": "system", "content": "You are Grok."},
                {"role": "user", "content": "task_7: which cities?"},
            ]
            for _ in range(2):
                conn = _Unix(str(sock))
                body = json.dumps({"model": "backbone", "messages": messages}).encode()
                conn.request(
                    "POST",
                    "/v1/chat/completions",
                    body=body,
                    headers={"Authorization": f"Bearer {relay.token}"},
                )
                reply = json.loads(conn.getresponse().read())
                conn.close()
                msg = reply["choices"][0]["message"]
                messages.append(msg)
                for call in msg.get("tool_calls") or []:
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": "cities.csv"}
                    )
        events.close()
    log = read_events((tmp_path / "events.jsonl").read_bytes())
    conv = conversation(log)
    assert conv["system_prompt"] == "You are Grok." and conv["user_prompt"].startswith("task_7")
    assert [t["content"] for t in conv["turns"]] == ["Looking.", "Done."]
    call = conv["turns"][0]["tool_calls"][0]
    assert call["name"] == "bash" and call["arguments"] == {"command": "ls"}
    assert call["output"] == "cities.csv"
    rep = srv.totals("task_7")
    assert conv["totals"]["input_tokens"] == rep.prompt_tokens > 0
    assert conv["totals"]["output_tokens"] == rep.completion_tokens
