"""Both relays mark the endpoint their upstream calls could not reach, and clear the mark.

Upstream is a loopback port where nothing listens (a socket bound but never listening, so
the port stays ours and a connection is refused at once), or the scripted server.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dataspace.errors import InfrastructureError
from dataspace.llm import LocalLimiter, MeteredClient, RetryPolicy
from dataspace.llm.models import ModelSpec
from dataspace.llm.relay import Relay
from dataspace.llm.wire_relay import WireRelay
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = pytest.mark.llm

KEY_ENV = "DATASPACE_TEST_RELAY_OUTAGE_KEY"
KEY = "sk-relay-outage-key"


@pytest.fixture
def dead_url() -> Iterator[str]:
    """``http://127.0.0.1:PORT/v1`` where nothing listens (connections are refused)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    finally:
        s.close()


def _chat(token: str) -> tuple[str, dict[str, str], bytes]:
    body = {"model": "m", "messages": [{"role": "user", "content": "Task ID: task_1"}]}
    return "/v1/chat/completions", {"Authorization": f"Bearer {token}"}, json.dumps(body).encode()


def _post_tcp(base: str, token: str) -> tuple[int, dict[str, Any]]:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    path, headers, body = _chat(token)
    conn.request("POST", path, body=body, headers={**headers, "Content-Type": "application/json"})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    return resp.status, data


# ---- the wire relay (native harnesses: the harness retries, the relay forwards) ----------
def _wire(upstream: str) -> WireRelay:
    model = ModelSpec(id="m", base_url=upstream, key_env=None, price_input=1.0)
    return WireRelay(wire="chat", model=model, upstream_base=upstream, api_key=KEY)


def test_wire_relay_marks_an_upstream_where_nothing_listens(dead_url):
    """Guards native harnesses' outages: a refused upstream was only ``model_endpoint``."""
    with _wire(dead_url) as relay:
        base = relay.serve_tcp()
        for _ in range(2):  # the harness's own retries, all refused
            status, data = _post_tcp(base, relay.token)
            assert status == 502 and data["error"]["type"] == "upstream_unavailable"
        assert relay.unreachable == dead_url
        netloc = dead_url.removeprefix("http://").removesuffix("/v1")
        assert relay.unreachable_error is not None
        assert f"model endpoint {netloc} unreachable" in relay.unreachable_error
        assert "refused" in relay.unreachable_error.lower()
        assert relay.calls == 0 and len(relay.infra_errors) == 2
        with pytest.raises(InfrastructureError) as err:
            relay.check_infra()
        assert err.value.code == "endpoint_unreachable"


def test_wire_relay_clears_the_mark_on_any_answer(dead_url):
    """An endpoint that answers, even with a 500, is not an outage: the mark is cleared."""
    steps = [{"content": "ok", "faults": [{"status": 500, "times": 1}]}]
    with ScriptedServer({"task_1": steps}) as srv, _wire(dead_url) as relay:
        base = relay.serve_tcp()
        assert _post_tcp(base, relay.token)[0] == 502
        assert relay.unreachable == dead_url
        relay.upstream_base = srv.url  # the endpoint comes back
        assert _post_tcp(base, relay.token)[0] == 500
        assert relay.unreachable is None and relay.unreachable_error is None
        assert relay.calls == 1  # the 500 was metered as a try
        relay.check_infra()  # a call reached the endpoint: no fault


# ---- the chat relay (smolagents: the relay's metered client retries) ---------------------
def _relay(base_url: str, retry: RetryPolicy) -> Relay:
    client = MeteredClient(
        ModelSpec(id="m", base_url=base_url, key_env=KEY_ENV, price_input=1.0),
        retry=retry,
        limiter=LocalLimiter(2),
    )
    return Relay(client)


@pytest.mark.parametrize(
    "retry",
    [
        RetryPolicy(initial_backoff=0.01, max_backoff=0.02, max_connect_retries=2),
        RetryPolicy(initial_backoff=0.01, max_backoff=0.02, exhausted_is_agent_error=True),
    ],
    ids=["infrastructure", "agent-outcome"],
)
def test_chat_relay_marks_retries_exhausted_on_a_dead_endpoint(monkeypatch, dead_url, retry):
    """Guards smolagents' outages: the client's exhausted connection retries (raised as an
    infrastructure fault or, with SDK-style retries, as the agent's outcome) mark the relay.
    """
    monkeypatch.setenv(KEY_ENV, KEY)
    relay = _relay(dead_url, retry)
    try:
        res = relay.handle("POST", *_chat(relay.token))
        assert res.status in (400, 502), res.body
        assert relay.unreachable == dead_url
        assert relay.unreachable_error is not None
        assert "refused" in relay.unreachable_error.lower()
    finally:
        relay.client.close()


def test_chat_relay_clears_the_mark_when_the_endpoint_comes_back(monkeypatch):
    """Only a last call that found no endpoint counts: the scripted server killed, then
    restarted on its port, and the next reply clears the mark."""
    monkeypatch.setenv(KEY_ENV, KEY)
    retry = RetryPolicy(initial_backoff=0.01, max_backoff=0.02, max_connect_retries=1)
    srv = ScriptedServer({"task_1": [{"content": "ok"}, {"content": "again"}]}).start()
    try:
        url, port = srv.url, srv.port
        relay = _relay(url, retry)
        assert relay.handle("POST", *_chat(relay.token)).status == 200
        assert relay.unreachable is None
        srv.kill()
        assert relay.handle("POST", *_chat(relay.token)).status == 502
        assert relay.unreachable == url
        srv.port_request = port
        srv.start()
        assert relay.handle("POST", *_chat(relay.token)).status == 200
        assert relay.unreachable is None and relay.unreachable_error is None
    finally:
        relay.client.close()
        srv.stop()


class _SlowToRecord(ScriptedServer):
    """Once killed, picks each request's script slowly, as a loaded machine may: a handler
    woken by the kill records its request a while after the kill."""

    def _select(self, body: Any) -> tuple[str | None, int]:
        if self._lives:
            time.sleep(0.3)
        return super()._select(body)


def test_a_request_held_when_the_server_is_killed_is_recorded_before_kill_returns():
    """Guards counting what an endpoint served across its death: a held request is recorded
    by its handler after the kill wakes it, and ``kill`` waits for that, so a count taken
    when it returns (what came after the kill) never grows by a request taken before."""
    srv = _SlowToRecord({"task_1": [{"faults": [{"wait": "stop"}], "content": "late"}]}).start()
    body = json.dumps({"model": "scripted", "messages": [{"role": "user", "content": "task_1"}]})
    errors: list[BaseException] = []

    def call() -> None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
        except (OSError, http.client.HTTPException) as exc:  # the kill cuts the call
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        deadline = time.monotonic() + 30
        while srv.in_flight < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.in_flight == 1 and not srv.requests  # held, not yet recorded
        srv.kill()
        assert [(r.script, r.outcome != "") for r in srv.requests] == [("task_1", True)]
        assert srv.in_flight == 0
    finally:
        caller.join(timeout=30)
        srv.stop()
    assert not caller.is_alive() and len(errors) == 1  # the call was cut, not answered
