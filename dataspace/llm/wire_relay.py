"""Relays for the native CLIs: one per wire API, on the controller, metered and pinned.

A native harness (Codex, Claude Code, Grok Build) calls its model itself, over its own wire
API. It is pointed at a ``WireRelay`` instead of the endpoint, and the relay:

- accepts only the attempt's one-attempt token (``Authorization: Bearer`` or ``x-api-key``)
  and replaces it with the real key, read host-side from the model's ``key_env``: the key
  never enters the sandbox;
- refuses any model other than the attempt's own (``400``, event ``model_refused``), so no
  internal role of a harness can reach another model;
- forwards the request and streams the reply back as it arrives, teeing the raw stream
  into the attempt's trace (event ``model_call`` with the request body and the raw reply,
  each capped at ``TRACE_BYTES``);
- meters every call: input, cached input, output and reasoning tokens as the endpoint
  reported them, cost at the model's prices and latency; ``usage`` sums them as the
  metered client does: a 200 reply is a model call and its seconds model time, any other
  reply a retry (the harness retries on its own) and its seconds retry time, and the wait
  for the endpoint's concurrency permit queue time.

Wire APIs (``wire``), as the official baseline's relays and configurations have them:

- ``chat``: ``POST .../chat/completions``; with ``normalize_finish_reasons`` a provider's
  ``finish_reason: "other"`` becomes ``"stop"`` (Grok Build 0.2.106 rejects the unknown
  label and aborts a finished turn);
- ``responses``: ``POST .../responses`` (Codex, ``wire_api = "responses"``);
- ``messages``: ``POST .../v1/messages`` and ``.../count_tokens`` (Claude Code); only the
  ``max_images`` (5) most recent image blocks are kept, older ones become a text
  placeholder, as the official relay does.

Reachability: ``serve_unix`` binds a Unix socket (the local sandbox gets it bound in and a
loopback forwarder inside its own network namespace); ``serve_tcp`` listens on an address
of the controller (on Kubernetes: a port of the controller pod in the range the
NetworkPolicies open to native-harness sandbox pods alone, where the one-attempt token is
what keeps every other pod out).

Outages: the relay does not retry (the harness does, on its own). ``unreachable`` names the
endpoint when the last upstream request got no HTTP answer at all (refused, reset, DNS,
TLS, a timeout before any byte), and ``unreachable_error`` says how; any later answer
clears it. When the harness ended on such a failure its retries ran out on it: the adapter
marks the attempt ``endpoint_unreachable`` (``dataspace.agents.protocol.end_on_outage``).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from dataspace.errors import InfrastructureError
from dataspace.llm.usage import Prices, TokenCounts, cost_usd
from dataspace.llm.wires import WIRES, parse_usage
from dataspace.llm.wires.chat import normalize_finish_line
from dataspace.status import ENDPOINT_UNREACHABLE
from dataspace.traces import EventLog, ModelRefused, RelayedCall, Usage

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024 * 1024
TRACE_BYTES = 4 * 1024 * 1024
MAX_IMAGES = 5
OMITTED_IMAGE_TEXT = (
    "[Earlier image omitted because the model backend accepts at most five images per request.]"
)
_ROUTES: dict[str, tuple[str, ...]] = {
    "chat": ("/chat/completions",),
    "responses": ("/responses",),
    "messages": ("/v1/messages", "/v1/messages/count_tokens"),
}
_HOP_HEADERS = {
    "accept-encoding",
    "connection",
    "content-length",
    "host",
    "proxy-connection",
    "transfer-encoding",
    "authorization",
    "x-api-key",
    "keep-alive",
    "te",
    "upgrade",
}


def keep_recent_images(body: Any, max_images: int = MAX_IMAGES) -> tuple[Any, int]:
    """Replace all but the ``max_images`` most recent image blocks with a text block.

    Returns the request and how many images were replaced.

    >>> img = {"type": "image", "source": {}}
    >>> body = {"messages": [{"role": "user", "content": [img, img, img]}]}
    >>> out, n = keep_recent_images(body, 2)
    >>> n, out["messages"][0]["content"][0]["type"], out["messages"][0]["content"][2]["type"]
    (1, 'text', 'image')
    """
    if max_images <= 0:
        raise ValueError("max_images must be positive")
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return body, 0

    def count(v: Any) -> int:
        if isinstance(v, dict) and v.get("type") == "image":
            return 1
        if isinstance(v, dict):
            return sum(count(x) for x in v.values())
        if isinstance(v, list):
            return sum(count(x) for x in v)
        return 0

    # images are told apart by their place in document order (the oldest come first)
    omit = max(0, count(body["messages"]) - max_images)
    if not omit:
        return body, 0
    seen = 0

    def replace(v: Any) -> Any:
        nonlocal seen
        if isinstance(v, dict) and v.get("type") == "image":
            seen += 1
            return {"type": "text", "text": OMITTED_IMAGE_TEXT} if seen <= omit else v
        if isinstance(v, dict):
            return {k: replace(x) for k, x in v.items()}
        if isinstance(v, list):
            return [replace(x) for x in v]
        return v

    body["messages"] = replace(body["messages"])
    return body, omit


def _upstream_url(base: str, path: str) -> str:
    b, p = urlsplit(base), urlsplit(path)
    base_path = b.path.rstrip("/")
    req = p.path
    if base_path and req.startswith(base_path + "/"):
        req = req[len(base_path) :]
    return urlunsplit((b.scheme, b.netloc, base_path + "/" + req.lstrip("/"), p.query, ""))


class WireRelay:
    """One attempt's relay for one wire API (see the module docstring).

    Args:
        wire: ``chat``, ``responses`` or ``messages``.
        model: the attempt's ``ModelSpec`` (id, key_env, prices, max_concurrency).
        upstream_base: the endpoint's base URL for this wire (``.../v1`` for chat and
            responses, the host root for messages).
        events: the attempt's trace.
        api_key: the real key; default: read from ``model.key_env`` on the controller.
        token: the one-attempt token (default: a fresh random one).
        normalize_finish_reasons: ``chat`` only: ``other`` -> ``stop``.
        max_images: ``messages`` only: images kept per request.
        time_left: seconds of working time left (None: unbounded); past it calls get 504.
        request_timeout: seconds one upstream request may take.
        on_call: called with the running usage after each metered reply (the attempt
            persists it at once, so a try killed mid-way is still counted).
    """

    def __init__(
        self,
        *,
        wire: str,
        model: Any,
        upstream_base: str,
        events: EventLog | None = None,
        api_key: str | None = None,
        token: str | None = None,
        normalize_finish_reasons: bool = False,
        max_images: int = MAX_IMAGES,
        time_left: Callable[[], float] | None = None,
        request_timeout: float = 900.0,
        on_call: Callable[[Usage], None] | None = None,
    ) -> None:
        if wire not in WIRES:
            raise ValueError(f"wire must be one of {WIRES}, got {wire!r}")
        if normalize_finish_reasons and wire != "chat":
            raise ValueError("finish-reason normalization applies to the chat wire only")
        from dataspace.llm.client import _read_key
        from dataspace.llm.limiter import model_limiter

        self.wire = wire
        self.model = model
        self.upstream_base = upstream_base
        self.events = events
        self._key = api_key if api_key is not None else _read_key(model)
        self.token = token or secrets.token_urlsafe(32)
        self.normalize_finish_reasons = normalize_finish_reasons
        self.max_images = max_images
        self.time_left = time_left
        self.request_timeout = request_timeout
        self.on_call = on_call  # the running usage after each metered reply (persisted)
        self.prices = Prices.of(model)
        self.limiter = model_limiter(upstream_base, model)
        self.usage = Usage()
        self.tokens = TokenCounts()
        self.calls = 0
        self.refused_models: list[str] = []
        self.reply_models: set[str] = set()
        self.finishes: list[str | None] = []
        self.infra_errors: list[str] = []
        self.unreachable: str | None = None  # the endpoint the last request could not reach
        self.unreachable_error: str | None = None
        self.deadline_hits = 0
        self._lock = threading.Lock()
        self._closed = False
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._unix_paths: list[Path] = []

    # ---- checks --------------------------------------------------------------------------
    def _authorized(self, headers: Mapping[str, str]) -> bool:
        low = {k.lower(): v for k, v in headers.items()}
        auth = low.get("authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        given = given or low.get("x-api-key", "").strip()
        return (
            bool(given)
            and not self._closed
            and hmac.compare_digest(given.encode(), self.token.encode())
        )

    def _refusal(self, status: int, message: str, kind: str) -> tuple[int, dict[str, str], bytes]:
        if self.wire == "messages":
            body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            body = {"error": {"message": message, "type": kind, "code": status}}
        return status, {"Content-Type": "application/json"}, json.dumps(body).encode()

    # ---- one request -----------------------------------------------------------------------
    def serve_request(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        write: Callable[[int, Mapping[str, str]], Callable[[bytes], None]],
    ) -> None:
        """Answer one HTTP request; ``write(status, headers)`` returns a body writer."""

        def answer(status: int, hdrs: Mapping[str, str], data: bytes) -> None:
            write(status, {**hdrs, "Content-Length": str(len(data))})(data)

        if not self._authorized(headers):
            answer(*self._refusal(401, "invalid or expired relay token", "authentication_error"))
            return
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route.endswith("/models"):
            data = {"object": "list", "data": [{"id": self.model.id, "object": "model"}]}
            answer(200, {"Content-Type": "application/json"}, json.dumps(data).encode())
            return
        if method != "POST" or not any(route.endswith(r) for r in _ROUTES[self.wire]):
            routes = ", ".join(_ROUTES[self.wire])
            answer(
                *self._refusal(
                    404, f"this relay serves POST {routes}, not {method} {path}", "not_found"
                )
            )
            return
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            answer(*self._refusal(400, "request body is not a JSON object", "invalid_request"))
            return
        asked = req.get("model")
        if asked != self.model.id:
            with self._lock:
                self.refused_models.append(str(asked))
            if self.events is not None:
                self.events.emit(ModelRefused(wire=self.wire, model=asked, allowed=self.model.id))
            answer(
                *self._refusal(
                    400,
                    f"model {asked!r} is not this attempt's model {self.model.id!r}",
                    "model_not_allowed",
                )
            )
            return
        counting = route.endswith("/count_tokens")
        omitted = 0
        if self.wire == "messages" and not counting:
            req, omitted = keep_recent_images(req, self.max_images)
            body = json.dumps(req, ensure_ascii=False, separators=(",", ":")).encode()
        left = self.time_left() if self.time_left is not None else None
        if left is not None and left <= 0:
            self.deadline_hits += 1
            answer(*self._refusal(504, "wall-clock budget exhausted", "deadline"))
            return
        timeout = (
            self.request_timeout if left is None else max(1.0, min(self.request_timeout, left))
        )
        self._forward(path, headers, body, req, timeout, counting, omitted, write, answer)

    def _forward(
        self,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        req: Mapping[str, Any],
        timeout: float,
        counting: bool,
        omitted: int,
        write: Callable[[int, Mapping[str, str]], Callable[[bytes], None]],
        answer: Callable[[int, Mapping[str, str], bytes], None],
    ) -> None:
        out_headers = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
        out_headers["Authorization"] = f"Bearer {self._key}"
        if self.wire == "messages":
            out_headers["x-api-key"] = self._key
        out_headers["Accept-Encoding"] = "identity"
        url = _upstream_url(self.upstream_base, path)
        request = urllib.request.Request(url, data=body, headers=out_headers, method="POST")
        queued = time.monotonic()
        lease = None if counting else self.limiter.acquire(ttl=timeout + 60.0)
        started = time.monotonic()
        raw = bytearray()
        status = 502
        try:
            try:
                response = urllib.request.urlopen(request, timeout=timeout)
            except urllib.error.HTTPError as exc:
                response = exc
            except (urllib.error.URLError, OSError) as exc:
                msg = f"model endpoint {urlsplit(url).netloc} unreachable: {exc}"
                with self._lock:
                    self.infra_errors.append(msg)
                    self.unreachable, self.unreachable_error = self.upstream_base, msg
                answer(*self._refusal(502, msg, "upstream_unavailable"))
                return
            with self._lock:
                self.unreachable = self.unreachable_error = None
            status = int(response.status)
            ctype = response.headers.get("Content-Type", "application/json")
            keep = {
                k: v
                for k, v in response.headers.items()
                if k.lower() in ("content-type", "retry-after", "request-id", "x-request-id")
                or k.lower().startswith(("anthropic-", "x-ratelimit", "openai-"))
            }
            keep["Content-Type"] = ctype
            keep["Cache-Control"] = "no-cache"
            send = write(status, keep)
            fix = self.normalize_finish_reasons and self.wire == "chat"
            try:
                with response:
                    if "event-stream" in ctype.lower() or fix:
                        for line in response:
                            if fix:
                                line = normalize_finish_line(line)
                            raw += line
                            send(line)
                    else:
                        while chunk := response.read(65536):
                            raw += chunk
                            send(chunk)
            except (BrokenPipeError, ConnectionResetError):
                logger.debug("relay: the harness closed its connection mid-reply")
        finally:
            if lease is not None:
                self.limiter.release(lease)
        if counting:
            return
        self._meter(status, time.monotonic() - started, started - queued, req, bytes(raw), omitted)

    def _meter(
        self,
        status: int,
        seconds: float,
        queued: float,
        req: Mapping[str, Any],
        raw: bytes,
        omitted: int,
    ) -> None:
        """Account one forwarded request as the metered client does.

        A reply with status 200 is a model call (its seconds are model time); any other is
        a failed try that the harness retries on its own (a retry and retry time).
        """
        call = parse_usage(self.wire, raw) if status == 200 else None
        tokens = call.tokens if call else TokenCounts()
        cost = cost_usd(tokens, self.prices)
        with self._lock:
            self.calls += 1
            self.tokens = self.tokens.plus(tokens)
            u = self.usage
            if status == 200:
                u.model_calls += 1
                u.model_seconds += seconds
            else:
                u.retries += 1
                u.retry_seconds += seconds
            u.queue_seconds += queued
            u.input_tokens += tokens.input_tokens
            u.cached_input_tokens += tokens.cached_input_tokens
            u.output_tokens += tokens.output_tokens
            u.reasoning_tokens += tokens.reasoning_tokens
            u.cost_usd += cost
            if call and call.model:
                self.reply_models.add(call.model)
            self.finishes.append(call.finish if call else f"http_{status}")
            running = Usage(**u.to_dict()) if status == 200 else None
        if running is not None and self.on_call is not None:
            self.on_call(running)
        if self.events is not None:
            sent = json.dumps(req, ensure_ascii=False)
            self.events.emit(
                RelayedCall(
                    wire=self.wire,
                    status=status,
                    seconds=round(seconds, 6),
                    queue_seconds=round(queued, 6),
                    model=req.get("model"),
                    reply_model=call.model if call else None,
                    finish=call.finish if call else None,
                    input_tokens=tokens.input_tokens,
                    cached_input_tokens=tokens.cached_input_tokens,
                    output_tokens=tokens.output_tokens,
                    reasoning_tokens=tokens.reasoning_tokens,
                    cost_usd=cost,
                    images_omitted=omitted,
                    request=sent[:TRACE_BYTES],
                    request_truncated=len(sent) > TRACE_BYTES,
                    raw=raw[:TRACE_BYTES].decode("utf-8", "replace"),
                    raw_truncated=len(raw) > TRACE_BYTES,
                )
            )

    # ---- HTTP fronts -----------------------------------------------------------------------
    def serve_tcp(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve HTTP on ``host:port``; return ``http://host:port``."""
        server = ThreadingHTTPServer((host, port), _handler_for(self))
        server.daemon_threads = True
        self._start(server)
        return f"http://{host}:{server.server_address[1]}"

    def serve_unix(self, path: Path | str) -> Path:
        """Serve HTTP on a Unix socket at ``path`` (mode 0666: the sandbox's user connects)."""
        path = Path(path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

        class _UnixHTTP(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        server = _UnixHTTP(str(path), _handler_for(self))
        os.chmod(path, 0o666)
        self._unix_paths.append(path)
        self._start(server)
        return path

    def _start(self, server: socketserver.BaseServer) -> None:
        t = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"wire-relay-{self.wire}",
            daemon=True,
        )
        t.start()
        self._servers.append(server)
        self._threads.append(t)

    def close(self) -> None:
        """Revoke the token and stop serving (idempotent)."""
        self._closed = True
        for s in self._servers:
            s.shutdown()
            s.server_close()
        for t in self._threads:
            t.join(timeout=5)
        for p in self._unix_paths:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        self._servers.clear()
        self._threads.clear()
        self._unix_paths.clear()

    def snapshot(self) -> Usage:
        """A copy of the usage so far."""
        with self._lock:
            return Usage(**self.usage.to_dict())

    def check_infra(self) -> None:
        """Raise ``InfrastructureError`` when every call failed to reach the endpoint."""
        if self.infra_errors and self.calls == 0:
            code = ENDPOINT_UNREACHABLE if self.unreachable else "model_endpoint"
            raise InfrastructureError(self.infra_errors[-1], code=code)

    def __enter__(self) -> WireRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler_for(relay: WireRelay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            if self.connection.family in (socket.AF_INET, socket.AF_INET6):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def address_string(self) -> str:
            return str(self.client_address or "unix")

        def log_message(self, format: str, *args: object) -> None:
            logger.debug("wire relay: " + format, *args)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            started = False

            def write(status: int, headers: Mapping[str, str]) -> Callable[[bytes], None]:
                nonlocal started
                started = True
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()

                def send(data: bytes) -> None:
                    self.wfile.write(data)
                    self.wfile.flush()

                return send

            if length > MAX_REQUEST_BYTES:
                status, hdrs, data = relay._refusal(413, "request too large", "invalid_request")
                write(status, {**hdrs, "Content-Length": str(len(data))})(data)
                self.close_connection = True
                return
            body = self.rfile.read(length) if length else b""
            try:
                relay.serve_request(
                    self.command, self.path, dict(self.headers.items()), body, write
                )
            except Exception as exc:  # never leave the harness without an answer
                logger.exception("wire relay failed")
                if not started:
                    status, hdrs, data = relay._refusal(500, f"relay failure: {exc}", "relay")
                    write(status, {**hdrs, "Content-Length": str(len(data))})(data)

        do_GET = _serve
        do_POST = _serve

    return Handler


__all__ = ["MAX_IMAGES", "OMITTED_IMAGE_TEXT", "WireRelay", "keep_recent_images"]
