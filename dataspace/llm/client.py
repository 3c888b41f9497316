"""The metered chat-completions client: every call counted, priced, timed and retried.

``MeteredClient`` wraps the ``openai`` package (imported when the client is built) for one
``ModelSpec``. The key is read from the controller's environment variable named by
``ModelSpec.key_env`` and never leaves this process. For each call it records input,
cached-input, output and reasoning tokens exactly as the endpoint reported them, the cost
from the model's prices (``dataspace.llm.usage``) and the latency of the successful request.

Retries: 429, 408, 409, 5xx answers, timeouts, connection errors and malformed replies
(a 200 whose body is not a chat completion) are retried with exponential backoff, honouring
``Retry-After``/``retry-after-ms``. Retries are not model turns: the time spent in failed
requests and backoff is recorded in ``Usage.retries``/``Usage.retry_seconds`` and, with the
time spent waiting for a concurrency permit, is excluded from the agent's working time.
When retries are exhausted the call raises ``InfrastructureError`` (the controller retries
the whole attempt). A request the endpoint refuses for its content (400, 413, 422: e.g. a
context too long) raises ``ModelRequestError``, an agent outcome. Authentication and
unknown-model answers (401, 403, 404) raise ``InfrastructureError`` with code
``model_config``, so they are never scored as wrong answers.

The official protocol (``RetryPolicy.sdk_default()`` with ``timeout_is_deadline=False``)
handles failures as the official baseline's OpenAI SDK client does by default: 2 retries of
408, 409, 429, any 5xx, timeouts and connection errors with the SDK's backoff, a malformed
reply not retried, each request allowed the agent's remaining time, and a request that still
fails raises ``ModelRequestError`` (the attempt ends ``runtime_error``).

Request bodies keep the SDK's key order (``model``, ``messages``, ``max_tokens``,
``temperature``, ``tool_choice``, ``tools``, then ``extra_body``), so a body is byte for
byte what the official baseline's ``chat.completions.create`` sends.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dataspace.errors import AgentError, ConfigError, InfrastructureError, ReplyError
from dataspace.llm.limiter import Limiter, model_limiter
from dataspace.llm.models import DEFAULT_CONNECT_TIMEOUT
from dataspace.llm.usage import Prices, TokenCounts, cost_usd, token_counts
from dataspace.status import ENDPOINT_UNREACHABLE
from dataspace.traces import EventLog, ModelCall, ModelRetry, Usage

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
CONFIG_STATUS = frozenset({401, 403, 404})
DEFAULT_MAX_OUTPUT_TOKENS = 32768
DEFAULT_REQUEST_TIMEOUT = 600.0
"""Seconds one model request may take where no remaining wall time bounds it (the extended
profile; the official one uses the attempt's remaining wall time)."""


class ModelRequestError(AgentError):
    """The endpoint refused the request itself (4xx other than auth/rate limits).

    Under the official profile it also ends a call whose retries ran out; ``unreachable``
    then says the last try never got an answer (refused, reset, DNS, TLS, a timeout before
    any byte): the row keeps the official ``runtime_error`` and is marked
    ``endpoint_unreachable``.
    """

    def __init__(
        self, message: str, *, status: int | None = None, unreachable: bool = False
    ) -> None:
        self.status = status
        self.unreachable = unreachable
        super().__init__(message)


class ModelDeadlineError(AgentError):
    """A model call could not finish within the agent's remaining working time."""


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """How failed requests are retried.

    Attributes:
        max_retries: retries after the first try (0 disables them).
        max_connect_retries: retries when no connection can be made at all (refused, no
            route, DNS): a dead endpoint is reported in seconds, not minutes.
        initial_backoff: the first delay cap in seconds (doubles per retry).
        max_backoff: the largest backoff delay in seconds.
        max_retry_after: the largest ``Retry-After`` honoured, in seconds.
        jitter: fraction of each backoff delay drawn at random (0 = none).
        retry_malformed: retry a 200 whose body is not a chat completion.
        retry_any_5xx: retry every 5xx status (not only ``RETRYABLE_STATUS``).
        exhausted_is_agent_error: when retries run out, raise ``ModelRequestError`` (the
            agent's outcome) instead of ``InfrastructureError`` (the attempt is retried).
    """

    max_retries: int = 10
    max_connect_retries: int = 3
    initial_backoff: float = 1.0
    max_backoff: float = 60.0
    max_retry_after: float = 600.0
    jitter: float = 0.5
    retry_malformed: bool = True
    retry_any_5xx: bool = False
    exhausted_is_agent_error: bool = False

    @classmethod
    def sdk_default(cls) -> RetryPolicy:
        """The OpenAI SDK's default retries (``DEFAULT_MAX_RETRIES`` 2, 0.5 s doubling to 8 s).

        >>> RetryPolicy.sdk_default().max_retries
        2
        """
        return cls(
            max_retries=2,
            initial_backoff=0.5,
            max_backoff=8.0,
            max_retry_after=60.0,
            jitter=0.25,
            retry_malformed=False,
            retry_any_5xx=True,
            exhausted_is_agent_error=True,
        )

    def retryable(self, status: int) -> bool:
        """Whether an HTTP status is retried.

        >>> RetryPolicy().retryable(501), RetryPolicy.sdk_default().retryable(501)
        (False, True)
        """
        return status in RETRYABLE_STATUS or (self.retry_any_5xx and status >= 500)

    def delay(
        self, retry: int, retry_after: float | None, rand: Callable[[], float] = random.random
    ) -> float:
        """Seconds to wait before retry number ``retry`` (1-based).

        >>> RetryPolicy(jitter=0).delay(1, None), RetryPolicy(jitter=0).delay(3, None)
        (1.0, 4.0)
        >>> RetryPolicy().delay(1, 2.5)
        2.5
        """
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_retry_after)
        cap = min(self.max_backoff, self.initial_backoff * 2 ** (retry - 1))
        return cap * (1 - self.jitter * rand())

    @classmethod
    def from_settings(cls, obj: Mapping[str, Any] | None) -> RetryPolicy:
        """Build from a settings mapping (unknown keys are a ConfigError)."""
        if not obj:
            return cls()
        allowed = set(cls.__dataclass_fields__)
        extra = sorted(set(obj) - allowed)
        if extra:
            raise ConfigError(f"settings.retry: unknown keys {extra} (allowed: {sorted(allowed)})")
        kw: dict[str, Any] = {}
        for k, v in obj.items():
            if k in ("retry_malformed", "retry_any_5xx", "exhausted_is_agent_error"):
                kw[k] = bool(v)
            else:
                kw[k] = int(v) if k in ("max_retries", "max_connect_retries") else float(v)
        return cls(**kw)


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date).

    >>> parse_retry_after({"retry-after": "3"})
    3.0
    >>> parse_retry_after({"retry-after-ms": "250"})
    0.25
    >>> parse_retry_after({}) is None
    True
    """
    if not headers:
        return None
    low = {str(k).lower(): str(v) for k, v in headers.items()}
    for name, div in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = low.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) / div)
        except ValueError:
            pass
    raw = low.get("retry-after")
    if raw:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(raw)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            return None
    return None


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """One successful model call: its tokens, cost, latency and the retries before it."""

    tokens: TokenCounts
    cost_usd: float
    latency_seconds: float
    retries: int
    retry_seconds: float
    queue_seconds: float
    raw_usage: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One tool call of an assistant reply (arguments as the raw JSON string)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, kw_only=True)
class Completion:
    """A parsed assistant reply.

    Attributes:
        message: the assistant message to append to the conversation.
        content: its text ('' when none).
        tool_calls: its tool calls, in order.
        finish_reason: as reported.
        response_id: the endpoint's id of the response.
        model: the model the endpoint says answered.
        call: usage, cost and timings of the call.
    """

    message: dict[str, Any]
    content: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    response_id: str | None
    model: str | None
    call: CallRecord


def check_completion_payload(payload: object) -> dict[str, Any]:
    """Validate the shape of a chat-completion body; raise ReplyError otherwise.

    >>> check_completion_payload({"choices": [{"message": {"content": "hi"}}]})["choices"][0][
    ...     "message"]["content"]
    'hi'
    """
    if not isinstance(payload, dict):
        raise ReplyError("reply is not a JSON object")
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ReplyError("reply has no choices")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        raise ReplyError("reply's first choice has no message")
    calls = msg.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise ReplyError("reply's tool_calls is not a list")
    return payload


def parse_completion(payload: Mapping[str, Any], call: CallRecord) -> Completion:
    """Turn a validated chat-completion body into a ``Completion``.

    Tool calls whose fields are missing or of the wrong type are kept (with an empty name or
    arguments) so the agent can answer them with an error observation; a missing call id is
    replaced by a generated one, used both in the returned message and its tool calls.
    """
    choice = payload["choices"][0]
    msg = choice["message"]
    content = msg.get("content")
    if not isinstance(content, str):
        content = "" if content is None else json.dumps(content, ensure_ascii=False)
    calls: list[ToolCall] = []
    serialized: list[dict[str, Any]] = []
    for i, raw in enumerate(msg.get("tool_calls") or []):
        entry: dict[str, Any] = raw if isinstance(raw, dict) else {}
        fn_raw = entry.get("function")
        fn: dict[str, Any] = fn_raw if isinstance(fn_raw, dict) else {}
        cid_raw = entry.get("id")
        cid = cid_raw if isinstance(cid_raw, str) and cid_raw else None
        name_raw = fn.get("name")
        name = name_raw if isinstance(name_raw, str) else ""
        args = fn.get("arguments")
        if args is None or args == "":  # as the official backend: ``arguments or "{}"``
            args = "{}"
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        tc = ToolCall(id=cid or f"call_{uuid.uuid4().hex[:12]}_{i}", name=name, arguments=args)
        calls.append(tc)
        serialized.append(
            {
                "id": tc.id,
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.arguments},
            }
        )
    message: dict[str, Any] = {"role": "assistant", "content": content}
    for extra in ("reasoning", "reasoning_details"):
        if msg.get(extra) is not None:
            message[extra] = msg[extra]
    if serialized:
        message["tool_calls"] = serialized
    finish = choice.get("finish_reason")
    rid = payload.get("id")
    model = payload.get("model")
    return Completion(
        message=message,
        content=content,
        tool_calls=tuple(calls),
        finish_reason=finish if isinstance(finish, str) else None,
        response_id=rid if isinstance(rid, str) else None,
        model=model if isinstance(model, str) else None,
        call=call,
    )


class MeteredClient:
    """Chat completions for one model, metered, retried and concurrency-capped.

    Args:
        model: the ``ModelSpec`` (id, base_url, key_env, prices, max_concurrency).
        max_output_tokens: ``max_tokens`` of each request (the paper: 32,768).
        temperature: sent only when set (provider default otherwise).
        extra_body: further request fields (e.g. provider options of a gateway).
        default_headers: extra HTTP headers.
        request_timeout: seconds one HTTP request may take.
        retry: the retry policy.
        timeout_is_deadline: a request is capped by the agent's time left and a timeout at
            that cap ends the call (``ModelDeadlineError``); when False, each request may
            take the whole time left (at least 1 s) and a timeout is retried like a failure.
        events: the attempt's trace (``model_call``/``model_retry`` events), optional.
        limiter: the concurrency limiter; default: the endpoint's (Ray-wide under Ray).
        api_key: the key itself; default: read from the environment variable ``key_env``.
        sleep: the sleep function (tests may speed it up).
        on_call: called with the running usage after each successful call (the attempt
            persists it at once, so a try killed mid-way is still counted).
    """

    def __init__(
        self,
        model: Any,
        *,
        max_output_tokens: int | None = DEFAULT_MAX_OUTPUT_TOKENS,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        default_headers: Mapping[str, str] | None = None,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        retry: RetryPolicy | None = None,
        timeout_is_deadline: bool = True,
        events: EventLog | None = None,
        limiter: Limiter | None = None,
        api_key: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_call: Callable[[Usage], None] | None = None,
    ) -> None:
        self.model = model
        self.on_call = on_call
        self.prices = Prices.of(model)
        self.max_output_tokens = max_output_tokens
        self.temperature = temperature
        self.extra_body = dict(extra_body or {})
        read = getattr(model, "read_timeout", None)
        self.request_timeout = float(read if read is not None else request_timeout)
        self.connect_timeout = float(
            getattr(model, "connect_timeout", None) or DEFAULT_CONNECT_TIMEOUT
        )
        self.retry = retry or RetryPolicy()
        self.timeout_is_deadline = timeout_is_deadline
        self.events = events
        self._sleep = sleep
        self._lock = threading.Lock()
        self.usage = Usage()
        self.tokens = TokenCounts()
        self.queue_seconds = 0.0
        key = api_key if api_key is not None else _read_key(model)
        self._client = _openai_client(model, key, default_headers)
        self.limiter = limiter or model_limiter(model.base_url, model)

    # ---- public -----------------------------------------------------------------------
    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        time_left: float | None = None,
    ) -> Completion:
        """One assistant turn.

        Args:
            messages: the conversation so far.
            tools: tool schemas (``tool_choice`` is ``auto`` when given).
            time_left: the agent's remaining working seconds; a request is never allowed
                to run past it (``ModelDeadlineError``).
        """
        body: dict[str, Any] = {"model": self.model.id, "messages": list(messages)}
        if self.max_output_tokens:
            body["max_tokens"] = self.max_output_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if tools:
            body["tool_choice"] = "auto"
            body["tools"] = list(tools)
        body.update(self.extra_body)
        payload, call = self.send(body, time_left=time_left, validate=check_completion_payload)
        return parse_completion(payload, call)

    def send(
        self,
        body: Mapping[str, Any],
        *,
        time_left: float | None = None,
        validate: Callable[[object], dict[str, Any]] = check_completion_payload,
    ) -> tuple[dict[str, Any], CallRecord]:
        """POST ``/chat/completions`` with retries; return the JSON reply and its record.

        The relay uses this to forward a harness's request body as it is.
        """
        retries = 0
        connect_failures = 0
        unreachable = False  # the last try got no HTTP answer at all
        retry_seconds = 0.0
        queue_seconds = 0.0
        while True:
            timeout = self.request_timeout
            capped = time_left is not None and time_left < timeout
            if time_left is not None and not self.timeout_is_deadline:
                timeout, capped = max(1.0, float(time_left)), False  # the official backend
            elif capped:
                assert time_left is not None
                if time_left <= 0:
                    raise ModelDeadlineError("no working time left for a model call")
                timeout = max(1.0, time_left)
            lease = self.limiter.acquire(ttl=timeout + 60.0)
            queue_seconds += lease.waited_seconds
            t0 = time.monotonic()
            failure: str
            retry_after: float | None = None
            try:
                status, headers, content = self._post(body, timeout)
            except _Timeout as exc:
                if capped:
                    raise ModelDeadlineError(
                        f"model call did not finish in the {timeout:.0f} s left"
                    ) from exc
                failure = f"timeout after {timeout:.0f} s"
                unreachable = True
            except _Connection as exc:
                failure = f"connection error: {exc}"
                connect_failures += 1 if exc.connect else 0
                unreachable = True
            else:
                unreachable = False
                if 200 <= status < 300:
                    try:
                        payload = validate(json.loads(content))
                    except (ValueError, ReplyError) as exc:
                        failure = f"malformed reply: {str(exc)[:200]}"
                        if not self.retry.retry_malformed:
                            raise ModelRequestError(failure, status=status) from exc
                    else:
                        latency = time.monotonic() - t0
                        call = self._record(payload, latency, retries, retry_seconds, queue_seconds)
                        return payload, call
                elif self.retry.retryable(status):
                    failure = f"HTTP {status}: {_snippet(content)}"
                    retry_after = parse_retry_after(headers)
                elif status in CONFIG_STATUS:
                    raise InfrastructureError(
                        f"model endpoint {self.model.base_url or 'default'} refused model "
                        f"{self.model.id!r} with HTTP {status}: {_snippet(content)} "
                        f"(check base_url, model id and the key in ${self.model.key_env})",
                        code="model_config",
                    )
                else:
                    raise ModelRequestError(
                        f"model endpoint answered HTTP {status}: {_snippet(content)}", status=status
                    )
            finally:
                self.limiter.release(lease)
            elapsed = time.monotonic() - t0
            retries += 1
            if connect_failures > self.retry.max_connect_retries:
                self._add_failed(retries - 1, retry_seconds + elapsed, queue_seconds)
                raise InfrastructureError(
                    f"model endpoint {self.model.base_url or 'default'} cannot be reached "
                    f"({connect_failures} tries): {failure} (check base_url and the network)",
                    code=ENDPOINT_UNREACHABLE,
                )
            if retries > self.retry.max_retries:
                self._add_failed(retries - 1, retry_seconds + elapsed, queue_seconds)
                if self.retry.exhausted_is_agent_error:
                    raise ModelRequestError(
                        f"model endpoint {self.model.base_url or 'default'} "
                        f"({self.model.id}) failed {retries} times; last: {failure}",
                        unreachable=unreachable,
                    )
                raise InfrastructureError(
                    f"model endpoint {self.model.base_url or 'default'} ({self.model.id}) "
                    f"failed {retries} times; last: {failure}",
                    code=ENDPOINT_UNREACHABLE if unreachable else "model_endpoint",
                )
            delay = self.retry.delay(retries, retry_after)
            logger.info("model call failed (%s); retry %d in %.2f s", failure, retries, delay)
            if self.events is not None:
                self.events.emit(
                    ModelRetry(
                        retry=retries,
                        error=failure,
                        delay_seconds=round(delay, 3),
                        request_seconds=round(elapsed, 3),
                    )
                )
            self._sleep(delay)
            retry_seconds += elapsed + delay

    def snapshot(self) -> Usage:
        """A copy of the running totals."""
        with self._lock:
            return Usage(**self.usage.to_dict())

    def close(self) -> None:
        """Close the HTTP connections."""
        try:
            self._client.close()
        except Exception:
            logger.debug("closing the openai client failed", exc_info=True)

    # ---- internals ----------------------------------------------------------------------
    def _post(self, body: Mapping[str, Any], timeout: float) -> tuple[int, dict[str, str], bytes]:
        import openai

        try:
            resp = self._client.post(
                "/chat/completions",
                body=dict(body),
                cast_to=_response_type(),
                options={
                    "timeout": openai.Timeout(timeout, connect=min(timeout, self.connect_timeout)),
                    "max_retries": 0,
                },
            )
            return int(resp.status_code), dict(resp.headers), resp.content
        except openai.APITimeoutError as exc:
            raise _Timeout(str(exc)) from exc
        except openai.APIStatusError as exc:
            r = exc.response
            return int(r.status_code), dict(r.headers), r.content
        except openai.APIConnectionError as exc:
            raise _Connection(str(exc.__cause__ or exc), connect=_no_connection(exc)) from exc

    def _record(
        self,
        payload: Mapping[str, Any],
        latency: float,
        retries: int,
        retry_seconds: float,
        queue_seconds: float,
    ) -> CallRecord:
        raw = payload.get("usage")
        tokens = token_counts(raw if isinstance(raw, Mapping) else None)
        call = CallRecord(
            tokens=tokens,
            cost_usd=cost_usd(tokens, self.prices),
            latency_seconds=latency,
            retries=retries,
            retry_seconds=retry_seconds,
            queue_seconds=queue_seconds,
            raw_usage=dict(raw) if isinstance(raw, Mapping) else {},
        )
        with self._lock:
            self.tokens = self.tokens.plus(tokens)
            u = self.usage
            u.input_tokens = self.tokens.input_tokens
            u.cached_input_tokens = self.tokens.cached_input_tokens
            u.output_tokens = self.tokens.output_tokens
            u.reasoning_tokens = self.tokens.reasoning_tokens
            # priced from the totals so the attempt's cost is exactly the formula
            u.cost_usd = cost_usd(self.tokens, self.prices)
            u.model_calls += 1
            u.model_seconds += latency
            u.retries += retries
            u.retry_seconds += retry_seconds
            u.queue_seconds += queue_seconds
            self.queue_seconds += queue_seconds
        if self.events is not None:
            self.events.emit(
                ModelCall(
                    model=self.model.id,
                    input_tokens=tokens.input_tokens,
                    cached_input_tokens=tokens.cached_input_tokens,
                    output_tokens=tokens.output_tokens,
                    reasoning_tokens=tokens.reasoning_tokens,
                    cost_usd=call.cost_usd,
                    latency_seconds=round(latency, 6),
                    retries=retries,
                    retry_seconds=round(retry_seconds, 6),
                    queue_seconds=round(queue_seconds, 6),
                )
            )
        if self.on_call is not None:
            self.on_call(self.snapshot())
        return call

    def _add_failed(self, retries: int, retry_seconds: float, queue_seconds: float) -> None:
        with self._lock:
            self.usage.retries += retries
            self.usage.retry_seconds += retry_seconds
            self.usage.queue_seconds += queue_seconds
            self.queue_seconds += queue_seconds


class _Timeout(InfrastructureError):
    pass


class _Connection(InfrastructureError):
    def __init__(self, message: str, *, connect: bool) -> None:
        self.connect = connect  # True: no connection was made at all
        super().__init__(message)


def _no_connection(exc: BaseException) -> bool:
    """True when the request failed before any connection existed (refused, DNS, route)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError | socket.gaierror) or type(seen).__name__ in (
            "ConnectError",
            "ConnectTimeout",
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _snippet(content: bytes, n: int = 300) -> str:
    return content[:n].decode("utf-8", "replace").replace("\n", " ")


def _response_type() -> type:
    """The HTTP response class of the installed openai package (httpx or httpx2)."""
    try:
        from openai._httpx2 import http_response_types

        return http_response_types()[0]
    except ImportError:  # older openai releases are built on httpx
        import httpx

        return httpx.Response


def _read_key(model: Any) -> str:
    env = getattr(model, "key_env", None)
    if not env:
        return "unused"  # local endpoints (e.g. a vLLM server) often need no key
    from dataspace.llm.keys import lookup_key

    key = lookup_key(env)
    if not key:
        raise InfrastructureError(
            f"model {model.id!r}: environment variable {env} (its key_env) is not set in the "
            "controller's environment; export it where the run is started",
            code="model_config",
        )
    return key


def _openai_client(model: Any, key: str, headers: Mapping[str, str] | None) -> Any:
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ConfigError(
            "the openai package is needed for model calls: pip install openai"
        ) from exc
    kwargs: dict[str, Any] = {"api_key": key, "max_retries": 0}
    if model.base_url:
        kwargs["base_url"] = model.base_url
    if headers:
        kwargs["default_headers"] = dict(headers)
    # The SDK's own HTTP client with its own defaults, but the process's one TLS context:
    # loading the certificate store costs milliseconds and a megabyte per client.
    kwargs["http_client"] = openai.DefaultHttpxClient(verify=_tls_context())
    return openai.OpenAI(**kwargs)


_TLS_LOCK = threading.Lock()
_TLS_CONTEXTS: dict[tuple[str | None, str | None], Any] = {}


def _tls_context() -> Any:
    """The default TLS context of the SDK's HTTP package, made once per process.

    Keyed by ``SSL_CERT_FILE``/``SSL_CERT_DIR``, which the default context reads when it
    is made; a context is safe to share between threads and connections.
    """
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _TLS_LOCK:
        ctx = _TLS_CONTEXTS.get(key)
        if ctx is None:
            try:
                import httpx2 as http
            except ImportError:  # older openai releases are built on httpx
                import httpx as http  # type: ignore[no-redef]
            make = getattr(http, "create_ssl_context", None)
            # True: the package makes its default context per client, as it would anyway
            ctx = _TLS_CONTEXTS[key] = make() if make is not None else True
        return ctx


__all__ = [
    "CallRecord",
    "Completion",
    "MeteredClient",
    "ModelDeadlineError",
    "ModelRequestError",
    "RetryPolicy",
    "ToolCall",
    "check_completion_payload",
    "parse_completion",
    "parse_retry_after",
]
