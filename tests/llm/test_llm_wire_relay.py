"""The per-wire relays against the scripted Responses, Messages and Chat servers."""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from dataspace.llm.models import ModelSpec
from dataspace.llm.usage import Prices, TokenCounts, cost_usd
from dataspace.llm.wire_relay import OMITTED_IMAGE_TEXT, WireRelay, keep_recent_images
from dataspace.llm.wires import parse_usage
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.testing.scripted_wire import ScriptedMessagesServer, ScriptedResponsesServer
from dataspace.traces import EventLog

pytestmark = pytest.mark.llm

KEY = "sk-wire-relay-test-5e1f0c9a"
PRICES = {"price_input": 2.0, "price_cached_input": 0.5, "price_output": 8.0}


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def _post(sock: Path, path: str, body: dict[str, Any], token: str) -> tuple[int, bytes, dict]:
    conn = _UnixConnection(str(sock))
    data = json.dumps(body).encode()
    conn.request(
        "POST",
        path,
        body=data,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    out = resp.read()
    headers = dict(resp.getheaders())
    conn.close()
    return resp.status, out, headers


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "relay.sock"


def _responses_relay(
    tmp_path: Path, sock: Path, steps: list[dict[str, Any]], *, posts: int
) -> tuple[ScriptedResponsesServer, WireRelay, list[tuple[int, bytes, dict]]]:
    """Post one Responses request ``posts`` times through a relay to the scripted server;
    the relay's trace goes to ``tmp_path/events.jsonl``."""
    with ScriptedResponsesServer({"task_1": steps}) as srv:
        model = ModelSpec(id="backbone", base_url=srv.url, key_env=None, **PRICES)
        events = EventLog(tmp_path / "events.jsonl")
        with WireRelay(
            wire="responses", model=model, upstream_base=srv.url, events=events, api_key=KEY
        ) as relay:
            relay.serve_unix(sock)
            body = {
                "model": "backbone",
                "stream": True,
                "input": [{"type": "message", "role": "user", "content": "Task ID: task_1"}],
                "tools": [{"type": "function", "name": "exec_command"}],
            }
            replies = [_post(sock, "/v1/responses", body, relay.token) for _ in range(posts)]
        events.close()
    return srv, relay, replies


def test_responses_relay_streams_meters_and_adds_the_key(tmp_path, sock):
    steps = [
        {
            "shell": "ls /workspace",
            "usage": {
                "prompt_tokens": 900,
                "cached_tokens": 600,
                "completion_tokens": 70,
                "reasoning_tokens": 20,
            },
        },
    ]
    srv, relay, ((status, raw, headers),) = _responses_relay(tmp_path, sock, steps, posts=1)
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert b"response.completed" in raw and b'"exec_command"' in raw
    # the endpoint saw the real key, never the token
    assert srv.requests[0].headers["Authorization"] == f"Bearer {KEY}"
    tokens = TokenCounts(
        input_tokens=900, cached_input_tokens=600, output_tokens=70, reasoning_tokens=20
    )
    assert relay.tokens == tokens
    rep = srv.totals("task_1")
    assert (rep.prompt_tokens, rep.cached_tokens, rep.completion_tokens) == (900, 600, 70)
    assert relay.usage.model_calls == 1 and relay.usage.model_seconds > 0
    assert relay.usage.cost_usd == cost_usd(tokens, Prices(input=2.0, cached_input=0.5, output=8.0))
    (call,) = [e for e in _events(tmp_path / "events.jsonl") if e["type"] == "model_call"]
    assert call["raw"] == raw.decode() and call["finish"] == "completed"
    assert KEY not in (tmp_path / "events.jsonl").read_text()


def test_messages_relay_keeps_the_five_most_recent_images(tmp_path, sock):
    with ScriptedMessagesServer({"*": [{"content": "ok"}]}) as srv:
        model = ModelSpec(id="backbone", base_url=srv.url, key_env=None)
        with WireRelay(wire="messages", model=model, upstream_base=srv.url, api_key=KEY) as relay:
            relay.serve_unix(sock)
            images = [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": f"img{i}"},
                }
                for i in range(7)
            ]
            body = {
                "model": "backbone",
                "stream": True,
                "max_tokens": 100,
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "look"}, *images[:4]]},
                    {"role": "assistant", "content": [{"type": "text", "text": "more"}]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "t", "content": images[4:]}
                        ],
                    },
                ],
            }
            status, raw, _ = _post(sock, "/v1/messages?beta=true", body, relay.token)
    assert status == 200 and b"message_stop" in raw
    sent = srv.requests[0].body["messages"]
    kept = json.dumps(sent)
    assert kept.count('"type": "image"') == 5
    assert sent[0]["content"][1] == {"type": "text", "text": OMITTED_IMAGE_TEXT}
    assert "img0" not in kept and "img1" not in kept and "img6" in kept
    assert {k.lower(): v for k, v in srv.requests[0].headers.items()}["x-api-key"] == KEY


def test_relay_refuses_other_models_and_bad_tokens(tmp_path, sock):
    with ScriptedMessagesServer({"*": [{"content": "ok"}]}) as srv:
        model = ModelSpec(id="backbone", base_url=srv.url, key_env=None)
        events = EventLog(tmp_path / "events.jsonl")
        with WireRelay(
            wire="messages", model=model, upstream_base=srv.url, api_key=KEY, events=events
        ) as relay:
            relay.serve_unix(sock)
            body = {"model": "claude-haiku-4-5", "max_tokens": 10, "messages": []}
            status, raw, _ = _post(sock, "/v1/messages", body, relay.token)
            assert status == 400 and b"model_not_allowed" in raw
            status, raw, _ = _post(sock, "/v1/messages", {**body, "model": "backbone"}, "wrong")
            assert status == 401
        events.close()
    assert relay.refused_models == ["claude-haiku-4-5"] and srv.requests == []
    kinds = [e["type"] for e in _events(tmp_path / "events.jsonl")]
    assert kinds == ["model_refused"]


def test_chat_relay_maps_finish_reason_other_to_stop(tmp_path, sock):
    """Grok Build 0.2.106 aborts on the non-standard ``other`` finish label."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    chunks = [
        {"id": "c", "model": "backbone", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
        {
            "id": "c",
            "model": "backbone",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "other"}],
        },
        {
            "id": "c",
            "model": "backbone",
            "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        },
    ]

    class Upstream(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
            data += b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a: object) -> None:
            pass

    up = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    t = threading.Thread(target=up.serve_forever, daemon=True)
    t.start()
    try:
        base = f"http://127.0.0.1:{up.server_address[1]}/v1"
        model = ModelSpec(id="backbone", base_url=base, key_env=None)
        with WireRelay(
            wire="chat", model=model, upstream_base=base, api_key=KEY, normalize_finish_reasons=True
        ) as relay:
            relay.serve_unix(sock)
            body = {"model": "backbone", "stream": True, "messages": []}
            status, raw, _ = _post(sock, "/v1/chat/completions", body, relay.token)
    finally:
        up.shutdown()
        up.server_close()
    assert status == 200
    assert b'"finish_reason":"stop"' in raw and b"other" not in raw
    assert relay.tokens.input_tokens == 10 and relay.finishes == ["stop"]


def test_parse_usage_reads_each_wire():
    chat = ScriptedServer(
        {"*": [{"content": "x", "usage": {"prompt_tokens": 5, "completion_tokens": 3}}]}
    )
    status, _, data, _ = chat.respond({"model": "m", "messages": []})
    assert status == 200
    got = parse_usage("chat", data)
    assert (got.tokens.input_tokens, got.tokens.output_tokens, got.finish) == (5, 3, "stop")
    msg = (
        b'data: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":4,'
        b'"cache_read_input_tokens":6,"cache_creation_input_tokens":1,"output_tokens":1}}}\n'
        b'data: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},'
        b'"usage":{"output_tokens":9}}\n'
    )
    got = parse_usage("messages", msg)
    assert got.tokens == TokenCounts(input_tokens=11, cached_input_tokens=6, output_tokens=9)
    assert got.finish == "max_tokens" and got.model == "m"


def test_keep_recent_images_rejects_a_non_positive_cap():
    with pytest.raises(ValueError):
        keep_recent_images({"messages": []}, 0)


def test_failed_replies_count_as_retries_not_model_calls(tmp_path, sock):
    """A 500 the harness retries is retry time, as in the metered client; the 200 is the call."""
    steps = [
        {
            "shell": "ls /workspace",
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
            "faults": [{"status": 500, "times": 2}],
            "delay": 0.05,
        }
    ]
    _, relay, replies = _responses_relay(tmp_path, sock, steps, posts=3)
    assert [status for status, _, _ in replies] == [500, 500, 200]
    u = relay.usage
    assert (u.model_calls, u.retries, relay.calls) == (1, 2, 3)
    calls = [e for e in _events(tmp_path / "events.jsonl") if e["type"] == "model_call"]
    assert [c["status"] for c in calls] == [500, 500, 200]
    # Model time is the successful reply's (scripted to take at least 50 ms), retry time the
    # failed ones', each as its trace event says.
    assert u.model_seconds >= 0.05
    assert u.model_seconds == pytest.approx(calls[2]["seconds"], abs=1e-5)
    assert u.retry_seconds == pytest.approx(calls[0]["seconds"] + calls[1]["seconds"], abs=1e-5)
    assert u.queue_seconds == pytest.approx(sum(c["queue_seconds"] for c in calls), abs=1e-5)
    assert (u.input_tokens, u.output_tokens) == (100, 10)
    assert relay.finishes == ["http_500", "http_500", "completed"]
