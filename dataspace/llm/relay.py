"""The relay: an OpenAI-compatible endpoint for harnesses that call the model themselves.

A harness running inside the sandbox (smolagents, later native CLIs) never sees the real
key or the real endpoint. It is given the relay's address and a one-run token; the relay
checks the token, forces the run's model id (every internal role of a harness is mapped to
the same backbone, fallback disabled), caps ``max_tokens``, forwards the request through a
``MeteredClient`` (real key, retries honouring ``Retry-After``, the endpoint's concurrency
cap) and meters usage into the attempt. The token dies with the relay (``close``).

Reachability: the relay answers plain function calls (``handle``), HTTP on 127.0.0.1
(``serve_tcp``) and HTTP on a Unix domain socket (``serve_unix``). The local sandbox has no
network at all, so in-sandbox harnesses reach it through the sandbox file bridge
(``dataspace.agents._smol_bridge``), which calls ``handle``.

Streaming requests (``"stream": true``) are answered as server-sent events synthesized from
one non-streamed upstream reply (one content chunk, one usage chunk, ``[DONE]``), so usage
is always reported and metered.

Outages: ``unreachable`` names the endpoint when the last forwarded call ran out of its
retries without the endpoint ever answering (the client's ``endpoint_unreachable``), and
``unreachable_error`` says how; any later answer clears it. A harness adapter marks its
attempt ``endpoint_unreachable`` from it when the attempt ended because of it.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dataspace.errors import InfrastructureError
from dataspace.llm.client import DEFAULT_MAX_OUTPUT_TOKENS
from dataspace.status import ENDPOINT_UNREACHABLE

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class RelayResponse:
    """One HTTP answer of the relay."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


def _error(status: int, message: str, kind: str = "relay_error") -> RelayResponse:
    body = json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
    return RelayResponse(status=status, body=body, headers={"Content-Type": "application/json"})


class Relay:
    """Forwards one attempt's model calls with the real key and meters them.

    Args:
        client: the attempt's ``MeteredClient`` (holds the key, prices and limiter).
        max_calls: model calls allowed (the attempt's model-turn budget); None = no cap.
        max_output_tokens: ceiling on ``max_tokens``/``max_completion_tokens`` (set when
            the harness sends none).
        time_left: seconds of working time left, or None; requests never outlive it.
        token: the one-run token (default: a fresh random one).
    """

    def __init__(
        self,
        client: Any,
        *,
        max_calls: int | None = None,
        max_output_tokens: int | None = DEFAULT_MAX_OUTPUT_TOKENS,
        time_left: Callable[[], float] | None = None,
        token: str | None = None,
    ) -> None:
        self.client = client
        self.max_calls = max_calls
        self.max_output_tokens = max_output_tokens
        self.time_left = time_left
        self.token = token or secrets.token_urlsafe(32)
        self.calls = 0
        self.refused_for_budget = 0
        self.errors: list[str] = []
        self.infra_errors: list[str] = []
        self.unreachable: str | None = None  # endpoint the last call could not reach
        self.unreachable_error: str | None = None
        self.deadline_hits = 0
        self._lock = threading.Lock()
        self._closed = False
        self._servers: list[socketserver.BaseServer] = []
        self._threads: list[threading.Thread] = []
        self._unix_paths: list[Path] = []

    # ---- core --------------------------------------------------------------------------
    def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> RelayResponse:
        """Answer one request (no I/O besides the upstream call)."""
        low = {str(k).lower(): str(v) for k, v in headers.items()}
        auth = low.get("authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if (
            self._closed
            or not given
            or not hmac.compare_digest(given.encode(), self.token.encode())
        ):
            return _error(401, "invalid or expired relay token", "authentication_error")
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route.endswith("/models"):
            data = {
                "object": "list",
                "data": [{"id": self.client.model.id, "object": "model", "owned_by": "relay"}],
            }
            return RelayResponse(
                status=200,
                body=json.dumps(data).encode(),
                headers={"Content-Type": "application/json"},
            )
        if method != "POST" or not route.endswith("/chat/completions"):
            return _error(404, f"the relay serves POST /v1/chat/completions, not {method} {path}")
        if len(body) > MAX_REQUEST_BYTES:
            return _error(413, f"request larger than {MAX_REQUEST_BYTES} bytes")
        try:
            req = json.loads(body)
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            return _error(400, "request body is not a JSON object")
        with self._lock:
            if self.max_calls is not None and self.calls >= self.max_calls:
                self.refused_for_budget += 1
                return _error(
                    400,
                    f"model turn budget of {self.max_calls} calls is exhausted",
                    "budget_exhausted",
                )
            self.calls += 1
        stream = bool(req.pop("stream", False))
        req.pop("stream_options", None)
        req["model"] = self.client.model.id
        cap = self.max_output_tokens
        if cap:
            for key in ("max_tokens", "max_completion_tokens"):
                v = req.get(key)
                if isinstance(v, int) and v > cap:
                    req[key] = cap
            if "max_tokens" not in req and "max_completion_tokens" not in req:
                req["max_tokens"] = cap
        return self._forward(req, stream)

    def _forward(self, req: dict[str, Any], stream: bool) -> RelayResponse:
        from dataspace.llm.client import ModelDeadlineError, ModelRequestError

        left = self.time_left() if self.time_left is not None else None
        try:
            payload, _ = self.client.send(req, time_left=left)
        except ModelDeadlineError as exc:
            self.errors.append(str(exc))
            self.deadline_hits += 1
            self._mark(None)
            return _error(504, f"wall-clock budget exhausted: {exc}", "deadline")
        except ModelRequestError as exc:
            self.errors.append(str(exc))
            self._mark(str(exc) if exc.unreachable else None)
            return _error(exc.status or 400, str(exc), "upstream_refused")
        except InfrastructureError as exc:
            self.errors.append(str(exc))
            self.infra_errors.append(str(exc))
            self._mark(str(exc) if exc.code == ENDPOINT_UNREACHABLE else None)
            return _error(502, f"model endpoint unavailable: {exc}", "upstream_unavailable")
        self._mark(None)
        if not stream:
            return RelayResponse(
                status=200,
                body=json.dumps(payload).encode(),
                headers={"Content-Type": "application/json"},
            )
        return RelayResponse(
            status=200,
            body=sse_from_completion(payload),
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
        )

    def _mark(self, error: str | None) -> None:
        """Record how the last call ended.

        ``error`` when its retries ran out without the endpoint ever answering (refused,
        reset, DNS, TLS, a timeout before any byte), else None: any answer clears the mark,
        so only an outage that ends the run counts.
        """
        with self._lock:
            self.unreachable = (self.client.model.base_url or "default") if error else None
            self.unreachable_error = error

    # ---- HTTP fronts --------------------------------------------------------------------
    def serve_tcp(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve HTTP on ``host:port`` in a thread; return the base URL (``.../v1``)."""
        server = ThreadingHTTPServer((host, port), _handler_for(self))
        server.daemon_threads = True
        self._start(server)
        return f"http://{host}:{server.server_address[1]}/v1"

    def serve_unix(self, path: Path | str) -> Path:
        """Serve HTTP on a Unix domain socket at ``path`` (mode 0666); return the path."""
        path = Path(path)
        if path.exists() or path.is_symlink():
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
            name="llm-relay",
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

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sse_from_completion(payload: Mapping[str, Any]) -> bytes:
    r"""Server-sent events equivalent to one chat completion (content, then usage).

    >>> out = sse_from_completion({"id": "x", "model": "m", "created": 1, "choices": [
    ...     {"index": 0, "message": {"role": "assistant", "content": "hi"},
    ...      "finish_reason": "stop"}], "usage": {"prompt_tokens": 1}})
    >>> out.count(b"data: "), out.endswith(b"data: [DONE]\n\n")
    (3, True)
    """
    base = {
        "id": payload.get("id", "relay"),
        "object": "chat.completion.chunk",
        "created": payload.get("created", int(time.time())),
        "model": payload.get("model"),
    }
    chunks = []
    for choice in payload.get("choices") or []:
        msg = dict(choice.get("message") or {})
        delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
        if msg.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(msg["tool_calls"])]
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": choice.get("index", 0),
                        "delta": delta,
                        "finish_reason": choice.get("finish_reason"),
                    }
                ],
            }
        )
    chunks.append({**base, "choices": [], "usage": payload.get("usage")})
    out = b"".join(b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n" for c in chunks)
    return out + b"data: [DONE]\n\n"


def _handler_for(relay: Relay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            if self.connection.family in (socket.AF_INET, socket.AF_INET6):
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def address_string(self) -> str:
            return str(self.client_address or "unix")

        def log_message(self, format: str, *args: object) -> None:
            logger.debug("relay: " + format, *args)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_REQUEST_BYTES:
                resp = _error(413, f"request larger than {MAX_REQUEST_BYTES} bytes")
                self.close_connection = True
            else:
                body = self.rfile.read(length) if length else b""
                resp = relay.handle(self.command, self.path, dict(self.headers.items()), body)
            self.send_response(resp.status)
            for k, v in resp.headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(resp.body)))
            self.end_headers()
            self.wfile.write(resp.body)

        do_GET = _serve
        do_POST = _serve

    return Handler


__all__ = ["Relay", "RelayResponse", "sse_from_completion"]
