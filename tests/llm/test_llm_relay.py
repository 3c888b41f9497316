"""The relay: one-run tokens, the real key upstream, model and token caps, metering."""

from __future__ import annotations

import json

import pytest

from dataspace.llm import LocalLimiter, MeteredClient, RetryPolicy
from dataspace.llm.models import ModelSpec
from dataspace.llm.relay import Relay
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = pytest.mark.llm

KEY_ENV = "DATASPACE_TEST_RELAY_KEY"
KEY = "sk-relay-upstream-key"


@pytest.fixture
def upstream(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    steps = [
        {"content": "one", "faults": [{"status": 429, "retry_after": 0.01, "times": 2}]},
        {"content": "two"},
        {"content": "three"},
    ]
    with ScriptedServer({"task_1": steps}) as srv:
        yield srv


def _relay(srv, **kw) -> Relay:
    client = MeteredClient(
        ModelSpec(
            id="real-model", base_url=srv.url, key_env=KEY_ENV, price_input=1.0, price_output=2.0
        ),
        retry=RetryPolicy(initial_backoff=0.01),
        limiter=LocalLimiter(4),
    )
    return Relay(client, **kw)


def _convo(n: int) -> list[dict]:
    msgs = [{"role": "user", "content": "Task ID: task_1"}]
    for i in range(n):
        msgs += [{"role": "assistant", "content": f"r{i}"}, {"role": "user", "content": "more"}]
    return msgs


def test_openai_client_through_tcp_relay(upstream):
    import openai

    with _relay(upstream, max_calls=2, max_output_tokens=1000) as relay:
        url = relay.serve_tcp()
        c = openai.OpenAI(base_url=url, api_key=relay.token, max_retries=0)
        r1 = c.chat.completions.create(model="whatever", messages=_convo(0), max_tokens=99999)
        r2 = c.chat.completions.create(model="other", messages=_convo(1))
        with pytest.raises(openai.BadRequestError, match="budget"):
            c.chat.completions.create(model="x", messages=_convo(2))
        bad = openai.OpenAI(base_url=url, api_key="not-the-token", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model="x", messages=_convo(0))
    assert (r1.choices[0].message.content, r2.choices[0].message.content) == ("one", "two")
    sent = [r for r in upstream.requests if r.outcome == "ok"]
    assert {r.body["model"] for r in sent} == {"real-model"}
    assert [r.body["max_tokens"] for r in sent] == [1000, 1000]
    auth = {
        r.headers.get("Authorization") or r.headers.get("authorization") for r in upstream.requests
    }
    assert auth == {f"Bearer {KEY}"}
    rep = upstream.totals("task_1")
    u = relay.client.usage
    assert (u.input_tokens, u.output_tokens, u.model_calls, u.retries) == (
        rep.prompt_tokens,
        rep.completion_tokens,
        2,
        2,
    )
    assert relay.calls == 2 and relay.refused_for_budget == 1


def test_token_is_revoked_on_close(upstream):
    relay = _relay(upstream)
    relay.close()
    resp = relay.handle(
        "POST", "/v1/chat/completions", {"Authorization": f"Bearer {relay.token}"}, b"{}"
    )
    assert resp.status == 401


def test_streaming_is_served_as_events_with_usage(upstream, tmp_path):
    import http.client
    import socket

    with _relay(upstream) as relay:
        path = relay.serve_unix(tmp_path / "relay.sock")
        conn = http.client.HTTPConnection("localhost")
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(path))
        conn.sock = sock
        body = json.dumps({"model": "x", "messages": _convo(0), "stream": True})
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=body,
            headers={"Authorization": f"Bearer {relay.token}", "Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        data = resp.read().decode()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    events = [line[6:] for line in data.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["content"] == "one"
    assert chunks[-1]["usage"]["prompt_tokens"] == relay.client.usage.input_tokens
    assert "stream" not in upstream.requests[-1].body


def test_upstream_failure_becomes_a_gateway_error(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    with ScriptedServer(
        {"task_1": [{"content": "x", "faults": [{"status": 500, "times": 9}]}]}
    ) as srv:
        client = MeteredClient(
            ModelSpec(id="m", base_url=srv.url, key_env=KEY_ENV),
            retry=RetryPolicy(max_retries=1, initial_backoff=0.001),
            limiter=LocalLimiter(1),
        )
        relay = Relay(client)
        resp = relay.handle(
            "POST",
            "/v1/chat/completions",
            {"authorization": f"Bearer {relay.token}"},
            json.dumps({"messages": _convo(0)}).encode(),
        )
    assert resp.status == 502 and relay.infra_errors
