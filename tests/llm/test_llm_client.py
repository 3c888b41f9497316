"""The metered client against the scripted server on loopback: usage, cost, retries, caps."""

from __future__ import annotations

import threading

import pytest

from dataspace.errors import ConfigError, InfrastructureError
from dataspace.llm import (
    LocalLimiter,
    MeteredClient,
    ModelDeadlineError,
    ModelRequestError,
    Prices,
    RetryPolicy,
    TokenCounts,
    cost_usd,
    load_models,
)
from dataspace.llm.models import ModelSpec
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = pytest.mark.llm

KEY_ENV = "DATASPACE_TEST_LLM_KEY"
FAST = RetryPolicy(initial_backoff=0.01, max_backoff=0.02, max_retries=10)
USER = [{"role": "user", "content": "Task ID: task_1 please"}]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-llm-test")


def _client(server, *, retry=FAST, **kw) -> MeteredClient:
    model = ModelSpec(
        id="m1",
        base_url=server.url,
        key_env=KEY_ENV,
        price_input=3.0,
        price_cached_input=0.3,
        price_output=15.0,
        max_concurrency=kw.pop("max_concurrency", 8),
    )
    return MeteredClient(
        model, retry=retry, limiter=kw.pop("limiter", None) or LocalLimiter(8), **kw
    )


def test_usage_is_summed_without_double_counting_and_priced_exactly():
    usages = [
        {
            "prompt_tokens": 1000,
            "completion_tokens": 200,
            "cached_tokens": 800,
            "reasoning_tokens": 150,
        },
        {"prompt_tokens": 1500, "completion_tokens": 50, "cached_tokens": 0, "reasoning_tokens": 0},
    ]
    with ScriptedServer(
        {"task_1": [{"content": "a", "usage": usages[0]}, {"content": "b", "usage": usages[1]}]}
    ) as srv:
        c = _client(srv)
        first = c.complete(USER)
        c.complete([*USER, first.message, {"role": "user", "content": "go on"}])
    u = c.usage
    assert (u.input_tokens, u.cached_input_tokens, u.output_tokens, u.reasoning_tokens) == (
        2500,
        800,
        250,
        150,
    )
    assert u.cost_usd == pytest.approx((1700 * 3.0 + 800 * 0.3 + 250 * 15.0) / 1e6, abs=0)
    assert first.call.cost_usd == cost_usd(
        TokenCounts(input_tokens=1000, cached_input_tokens=800, output_tokens=200),
        Prices(input=3.0, cached_input=0.3, output=15.0),
    )
    assert u.model_calls == 2 and u.retries == 0


def test_faults_are_retried_honouring_retry_after():
    faults = [
        {"status": 429, "retry_after": 0.15, "times": 2},
        {"status": 500, "times": 1},
        {"status": 502, "times": 1},
        {"malformed": "not_json"},
        {"malformed": "no_choices"},
        {"drop": True},
    ]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)

    with ScriptedServer({"task_1": [{"content": "ok", "faults": faults}]}) as srv:
        c = _client(srv, sleep=sleep)
        reply = c.complete(USER)
    assert reply.content == "ok"
    assert c.usage.retries == 7 and c.usage.model_calls == 1
    assert sleeps[:2] == [0.15, 0.15]  # Retry-After, not the backoff
    assert all(0 < s <= 0.02 for s in sleeps[2:])
    assert reply.call.retries == 7


def test_retries_exhausted_is_an_infrastructure_error():
    with ScriptedServer(
        {"task_1": [{"content": "x", "faults": [{"status": 503, "times": 9}]}]}
    ) as srv:
        c = _client(srv, retry=RetryPolicy(max_retries=3, initial_backoff=0.001))
        with pytest.raises(InfrastructureError) as err:
            c.complete(USER)
    assert err.value.code == "model_endpoint" and "failed 4 times" in str(err.value)
    assert c.usage.retries == 3 and c.usage.model_calls == 0


def test_refusals_are_not_retried():
    with ScriptedServer(
        {
            "task_1": [{"content": "x", "faults": [{"status": 400}]}],
            "task_2": [{"content": "x", "faults": [{"status": 401}]}],
        }
    ) as srv:
        c = _client(srv)
        with pytest.raises(ModelRequestError):
            c.complete(USER)
        with pytest.raises(InfrastructureError) as err:
            c.complete([{"role": "user", "content": "Task ID: task_2"}])
    assert err.value.code == "model_config"
    assert c.usage.retries == 0 and len(srv.requests) == 2


def test_missing_key_variable_is_a_configuration_fault(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(InfrastructureError, match=KEY_ENV):
        MeteredClient(ModelSpec(id="m", base_url="http://127.0.0.1:9/v1", key_env=KEY_ENV))


def test_time_left_bounds_a_slow_reply():
    with ScriptedServer({"task_1": [{"content": "slow", "delay": 3.0}]}) as srv:
        c = _client(srv)
        with pytest.raises(ModelDeadlineError):
            c.complete(USER, time_left=1.0)


def test_slow_reply_within_budget_counts_as_latency():
    with ScriptedServer({"task_1": [{"content": "slow", "delay": 0.3}]}) as srv:
        c = _client(srv)
        reply = c.complete(USER, time_left=30)
    assert reply.call.latency_seconds >= 0.3 and c.usage.model_seconds >= 0.3


def test_concurrency_cap_holds_across_threads():
    limiter = LocalLimiter(2)
    with ScriptedServer({"*": [{"content": "x", "delay": 0.15}]}) as srv:
        clients = [_client(srv, limiter=limiter) for _ in range(6)]
        threads = [
            threading.Thread(target=c.complete, args=([{"role": "user", "content": "hi"}],))
            for c in clients
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(srv.requests) == 6
    assert srv.max_in_flight == 2
    assert limiter.in_use() == 0


def test_malformed_tool_call_fields_survive_parsing():
    step = {"tool_calls": [{"name": "bash", "arguments": "{oops"}, {"id": "", "name": ""}]}
    with ScriptedServer({"task_1": [step]}) as srv:
        reply = _client(srv).complete(USER, [])
    assert [c.arguments for c in reply.tool_calls] == ["{oops", "{}"]
    assert reply.tool_calls[1].id and reply.message["tool_calls"][1]["id"] == reply.tool_calls[1].id


def test_models_file(tmp_path):
    p = tmp_path / "models.yaml"
    p.write_text(
        "schema_version: '1.0'\nmodels:\n  a:\n    id: vendor/a\n    base_url: "
        "http://127.0.0.1:1/v1\n    key_env: K\n    prices: {input: 1.5, output: 6}\n"
        "    max_concurrency: 3\n"
    )
    m = load_models(p)["a"]
    assert (m.id, m.price_input, m.price_cached_input, m.price_output, m.max_concurrency) == (
        "vendor/a",
        1.5,
        1.5,
        6.0,
        3,
    )
    p.write_text("models:\n  a:\n    id: x\n    prices: {input: FILL_ME}\n")
    with pytest.raises(ConfigError, match=r"models\.a\.prices\.input"):
        load_models(p)


def test_sdk_default_retries_give_up_after_two_as_an_agent_outcome():
    """Guards the official protocol: the SDK's 2 retries, then the attempt's runtime_error."""
    with ScriptedServer(
        {"task_1": [{"content": "x", "faults": [{"status": 501, "times": 3}]}]}
    ) as srv:
        sleeps: list[float] = []
        c = _client(srv, retry=RetryPolicy.sdk_default(), sleep=sleeps.append)
        with pytest.raises(ModelRequestError, match="failed 3 times"):
            c.complete(USER)
    assert len(srv.requests) == 3  # any 5xx is retried, as the SDK does
    assert len(sleeps) == 2 and 0.375 <= sleeps[0] <= 0.5 and 0.75 <= sleeps[1] <= 1.0
    with ScriptedServer(
        {"task_1": [{"content": "x", "faults": [{"malformed": "not_json", "times": 1}]}]}
    ) as srv:
        c = _client(srv, retry=RetryPolicy.sdk_default())
        with pytest.raises(ModelRequestError, match="malformed"):
            c.complete(USER)
    assert len(srv.requests) == 1  # a body the SDK cannot parse is not retried


def test_official_request_timeout_is_the_time_left_and_is_retried():
    """Guards the official protocol: a request may take the time left; a timeout is retried."""
    with ScriptedServer(
        {"task_1": [{"content": "late", "faults": [{"delay": 2.5, "times": 1}]}]}
    ) as srv:
        c = _client(srv, retry=RetryPolicy.sdk_default(), timeout_is_deadline=False)
        reply = c.complete(USER, time_left=1.0)  # the first request times out at 1 s
    assert reply.content == "late" and c.usage.retries == 1
    assert len(srv.requests) >= 1


def test_request_bodies_keep_the_sdk_key_order():
    """Guards byte-level conformance: the keys in chat.completions.create's order."""
    with ScriptedServer({"task_1": [{"content": "x"}]}) as srv:
        c = _client(srv, temperature=0.5, extra_body={"providerOptions": {"a": 1}})
        c.complete(USER, [{"type": "function", "function": {"name": "f", "parameters": {}}}])
    keys = list(srv.requests[0].body)
    assert keys == [
        "model",
        "messages",
        "max_tokens",
        "temperature",
        "tool_choice",
        "tools",
        "providerOptions",
    ]


def _dead_endpoint_client(**kw) -> MeteredClient:
    """A client whose endpoint was served once and is now gone (connections refused)."""
    with ScriptedServer({}) as srv:
        client = _client(srv, **kw)
    return client


def test_an_unreachable_endpoint_is_marked_under_the_official_profile():
    """Guards outages under the official profile: the SDK's retries end the call as the
    official agent does (``ModelRequestError``, a ``runtime_error``), marked unreachable."""
    official = RetryPolicy.sdk_default()
    c = _dead_endpoint_client(retry=RetryPolicy(**{**official.__dict__, "initial_backoff": 0.01}))
    with pytest.raises(ModelRequestError) as err:
        c.complete(USER)
    assert err.value.unreachable is True and "failed 3 times" in str(err.value)


def test_an_unreachable_endpoint_is_infrastructure_under_the_extended_profile():
    """Guards the extended profile: an outage past retries is ``endpoint_unreachable``."""
    c = _dead_endpoint_client(retry=RetryPolicy(initial_backoff=0.01, max_connect_retries=2))
    with pytest.raises(InfrastructureError) as err:
        c.complete(USER)
    assert err.value.code == "endpoint_unreachable" and "cannot be reached" in str(err.value)


def test_an_endpoint_that_answers_errors_is_not_marked_unreachable():
    """Guards the mark's meaning: a 500 is an answer, so the endpoint was reachable."""
    with ScriptedServer(
        {"task_1": [{"content": "x", "faults": [{"status": 500, "times": 9}]}]}
    ) as srv:
        official = RetryPolicy.sdk_default()
        c = _client(srv, retry=RetryPolicy(**{**official.__dict__, "initial_backoff": 0.01}))
        with pytest.raises(ModelRequestError) as err:
            c.complete(USER)
    assert err.value.unreachable is False and "HTTP 500" in str(err.value)


def test_each_call_reports_the_running_usage_as_it_completes():
    """Guards the cost of interrupted attempts: usage is handed over per call, not at the end."""
    seen: list = []
    with ScriptedServer({"task_1": [{"content": "a"}, {"content": "b"}]}) as srv:
        c = _client(srv, on_call=seen.append)
        c.complete(USER)
        assert [u.model_calls for u in seen] == [1] and seen[0].cost_usd == c.usage.cost_usd
        c.complete([*USER, {"role": "assistant", "content": "a"}])
    assert [u.model_calls for u in seen] == [1, 2] and seen[-1].cost_usd == c.usage.cost_usd
