"""Scripted servers for the Responses and Anthropic Messages wire APIs, on 127.0.0.1.

They stand in for a paid endpoint behind the native CLIs (Codex speaks the Responses API,
Claude Code the Anthropic Messages API) exactly as ``ScriptedServer`` does for Chat
Completions, and share its scripting model: ``scripts`` maps a script name (a task id) to
steps; the script of a request is the one whose name appears in its first user message;
the step is the number of assistant turns already in the conversation; ``faults``,
``delay`` and ``usage`` work as there, and ``reported``/``totals`` sum what was reported.

A step may name a shell command instead of a tool call, which each server maps onto the
harness's own shell tool (found in the request's ``tools``)::

    {"shell": "cat /workspace/a.csv > /output/prediction.csv", "content": "optional"}

``ScriptedResponsesServer`` answers ``POST .../responses`` with the streamed event
sequence (``response.created``, ``response.output_item.added``/``done`` per item,
``response.output_text.delta``, ``response.completed`` with ``usage``).
``ScriptedMessagesServer`` answers ``POST .../v1/messages`` with Anthropic server-sent
events (``message_start`` ... ``message_stop``), or one JSON message when the request is
not streamed, and ``.../count_tokens``. Both report the request's model back, so a relay
that forwards the wrong model is visible in the reply.

A step may claim another model in its reply (``"reply_model": "other"``), to test the
single-backbone validators, and may end the turn early: ``"stop_reason": "max_tokens"``
(Messages) or ``"incomplete": "max_output_tokens"`` (Responses) to script an exhausted
output.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import time
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any

from dataspace.testing.scripted_server import (
    FALLBACK,
    LoopbackHTTPServer,
    Reported,
    ScriptedServer,
)

logger = logging.getLogger(__name__)


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, dict):
                parts.append(str(p.get("text", "")))
        return " ".join(parts)
    return ""


def _match(names: list[str], text: str, fallback: str | None) -> str | None:
    return next(
        (k for k in names if re.search(rf"(?<![\w]){re.escape(k)}(?![\w])", text)), fallback
    )


class _WireServer(ScriptedServer):
    """Shared lifecycle, fault handling and accounting of the wire-API scripted servers."""

    routes: tuple[str, ...] = ()

    def start(self) -> _WireServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        server = self

        class Handler(_WireHandler):
            scripted = server

        self._httpd, self._thread = LoopbackHTTPServer.serve(Handler, name="scripted-wire-server")
        return self

    def __enter__(self) -> _WireServer:
        return self.start()

    @property
    def base(self) -> str:
        """``http://127.0.0.1:PORT`` (without ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    def _names(self) -> list[str]:
        return sorted((k for k in self.scripts if k != FALLBACK), key=len, reverse=True)

    def _fallback(self) -> str | None:
        return FALLBACK if FALLBACK in self.scripts else None

    def _count(self, name: str | None, prompt: int, cached: int, out: int, reason: int) -> None:
        with self._lock:
            r = self.reported.setdefault(name or "", Reported())
            r.prompt_tokens += prompt
            r.cached_tokens += cached
            r.completion_tokens += out
            r.reasoning_tokens += reason
            r.replies += 1

    def respond_wire(
        self, path: str, body: Mapping[str, Any]
    ) -> tuple[int, dict[str, str], bytes, str]:
        """Status, headers, body and outcome for one request (no I/O but the delay)."""
        name, step = self._select(body)
        steps = self.scripts.get(name, []) if name is not None else []
        spec: Mapping[str, Any] = steps[step] if step < len(steps) else {}
        fault = self._fault(name, step, spec)
        if fault is not None:
            with self._lock:
                self.reported.setdefault(name or "", Reported()).faults += 1
            if "delay" in fault and not ({"status", "malformed", "drop"} & set(fault)):
                time.sleep(float(fault["delay"]))
            elif "status" in fault:
                status = int(fault["status"])
                headers = {"Content-Type": "application/json"}
                if fault.get("retry_after") is not None:
                    headers["Retry-After"] = str(fault["retry_after"])
                err = {"type": "error", "error": {"type": "scripted", "message": f"fault {status}"}}
                return status, headers, json.dumps(err).encode(), f"fault:{status}"
            elif "malformed" in fault:
                ctype = {"Content-Type": "text/event-stream"}
                return 200, ctype, b"data: {this is not json\n\n", "fault:malformed"
            elif fault.get("drop"):
                return -1, {}, b"", "fault:drop"
        delay = float(spec.get("delay", 0.0)) + self.latency
        if delay > 0:
            time.sleep(delay)
        return self._render(name, step, spec, body)

    def _render(
        self, name: str | None, step: int, spec: Mapping[str, Any], body: Mapping[str, Any]
    ) -> tuple[int, dict[str, str], bytes, str]:
        raise NotImplementedError

    @staticmethod
    def _sizes(spec: Mapping[str, Any], body: Mapping[str, Any], reply: object) -> dict[str, int]:
        u = spec.get("usage") or {}
        sent = body.get("input", body.get("messages"))
        prompt = int(u.get("prompt_tokens", max(1, len(json.dumps(sent)) // 4)))
        completion = int(u.get("completion_tokens", max(1, len(json.dumps(reply)) // 4)))
        return {
            "prompt": prompt,
            "completion": completion,
            "cached": min(prompt, int(u.get("cached_tokens", prompt // 2))),
            "reasoning": min(completion, int(u.get("reasoning_tokens", completion // 3))),
        }


class ScriptedResponsesServer(_WireServer):
    """Scripted streaming Responses API (``POST /v1/responses``), as Codex calls it."""

    routes = ("/responses",)

    @property
    def url(self) -> str:
        """Base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"{self.base}/v1"

    def _select(self, body: Mapping[str, Any]) -> tuple[str | None, int]:
        items = body.get("input")
        items = items if isinstance(items, list) else []
        text = ""
        for item in items:
            if isinstance(item, dict) and item.get("role") == "user":
                text = _content_text(item.get("content"))
                if _match(self._names(), text, None):
                    break
        name = _match(self._names(), text, self._fallback())
        # one assistant turn = one maximal run of items the model produced
        turns, inside = 0, False
        for item in items:
            mine = isinstance(item, dict) and (
                item.get("type") in ("function_call", "reasoning", "local_shell_call")
                or (item.get("type", "message") == "message" and item.get("role") == "assistant")
            )
            if mine and not inside:
                turns += 1
            inside = mine
        return name, turns

    def _render(
        self, name: str | None, step: int, spec: Mapping[str, Any], body: Mapping[str, Any]
    ) -> tuple[int, dict[str, str], bytes, str]:
        rid = f"resp_{uuid.uuid4().hex[:16]}"
        model = str(spec.get("reply_model") or body.get("model", "scripted"))
        items: list[dict[str, Any]] = []
        text = spec.get("content") if spec else self.exhausted_reply
        if text:
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{uuid.uuid4().hex[:12]}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": str(text), "annotations": []}],
                }
            )
        for i, (tool, args) in enumerate(self._calls(spec, body)):
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{step}_{i}_{uuid.uuid4().hex[:8]}",
                    "call_id": f"call_{step}_{i}_{uuid.uuid4().hex[:8]}",
                    "name": tool,
                    "arguments": args,
                    "status": "completed",
                }
            )
        n = self._sizes(spec, body, items)
        self._count(name, n["prompt"], n["cached"], n["completion"], n["reasoning"])
        usage = {
            "input_tokens": n["prompt"],
            "input_tokens_details": {"cached_tokens": n["cached"]},
            "output_tokens": n["completion"],
            "output_tokens_details": {"reasoning_tokens": n["reasoning"]},
            "total_tokens": n["prompt"] + n["completion"],
        }
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
        out = [
            _sse(
                "response.created",
                {
                    "type": "response.created",
                    "response": {**base, "status": "in_progress", "output": []},
                },
            )
        ]
        for index, item in enumerate(items):
            out.append(
                _sse(
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": item},
                )
            )
            if item["type"] == "message":
                delta = item["content"][0]["text"]
                out.append(
                    _sse(
                        "response.output_text.delta",
                        {
                            "type": "response.output_text.delta",
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": delta,
                        },
                    )
                )
            out.append(
                _sse(
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                )
            )
        final = {**base, "status": "completed", "output": items, "usage": usage}
        kind = "response.completed"
        if spec.get("incomplete"):
            final["status"] = "incomplete"
            final["incomplete_details"] = {"reason": str(spec["incomplete"])}
            kind = "response.incomplete"
        out.append(_sse(kind, {"type": kind, "response": final}))
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        return 200, headers, b"".join(out), "ok"

    @staticmethod
    def _calls(spec: Mapping[str, Any], body: Mapping[str, Any]) -> list[tuple[str, str]]:
        calls: list[tuple[str, str]] = []
        tools = {
            str(t.get("name") or t.get("type"))
            for t in body.get("tools") or []
            if isinstance(t, dict)
        }
        if spec.get("shell") is not None:
            cmd = str(spec["shell"])
            if "exec_command" in tools:
                calls.append(("exec_command", json.dumps({"cmd": cmd})))
            elif "shell_command" in tools:
                calls.append(("shell_command", json.dumps({"command": cmd})))
            else:
                calls.append(("shell", json.dumps({"command": ["bash", "-lc", cmd]})))
        for c in spec.get("tool_calls") or []:
            args = c.get("arguments", {})
            calls.append(
                (str(c.get("name", "")), args if isinstance(args, str) else json.dumps(args))
            )
        return calls


class ScriptedMessagesServer(_WireServer):
    """Scripted Anthropic Messages API (``POST /v1/messages``), as Claude Code calls it."""

    routes = ("/v1/messages", "/v1/messages/count_tokens")

    @property
    def url(self) -> str:
        """Base URL as ``ANTHROPIC_BASE_URL`` takes it (``http://127.0.0.1:PORT``)."""
        return self.base

    def _select(self, body: Mapping[str, Any]) -> tuple[str | None, int]:
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        text = ""
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "user":
                text = _content_text(m.get("content"))
                break
        name = _match(self._names(), text, self._fallback())
        step = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        return name, step

    def _render(
        self, name: str | None, step: int, spec: Mapping[str, Any], body: Mapping[str, Any]
    ) -> tuple[int, dict[str, str], bytes, str]:
        model = str(spec.get("reply_model") or body.get("model", "scripted"))
        blocks: list[dict[str, Any]] = []
        text = spec.get("content") if spec else self.exhausted_reply
        if text:
            blocks.append({"type": "text", "text": str(text)})
        calls: list[tuple[str, Any]] = []
        if spec.get("shell") is not None:
            calls.append(("Bash", {"command": str(spec["shell"]), "description": "run"}))
        for c in spec.get("tool_calls") or []:
            args = c.get("arguments", {})
            calls.append(
                (str(c.get("name", "")), json.loads(args) if isinstance(args, str) else args)
            )
        for i, (tool, args) in enumerate(calls):
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{step}_{i}_{uuid.uuid4().hex[:8]}",
                    "name": tool,
                    "input": args,
                }
            )
        stop = str(spec.get("stop_reason") or ("tool_use" if calls else "end_turn"))
        n = self._sizes(spec, body, blocks)
        n["reasoning"] = 0  # the Messages API reports no separate reasoning count
        self._count(name, n["prompt"], n["cached"], n["completion"], 0)
        usage = {
            "input_tokens": n["prompt"] - n["cached"],
            "cache_read_input_tokens": n["cached"],
            "cache_creation_input_tokens": 0,
            "output_tokens": n["completion"],
        }
        mid = f"msg_{uuid.uuid4().hex[:16]}"
        message = {"id": mid, "type": "message", "role": "assistant", "model": model}
        if not body.get("stream"):
            full = {
                **message,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": usage,
            }
            return 200, {"Content-Type": "application/json"}, json.dumps(full).encode(), "ok"
        start_usage = {**usage, "output_tokens": 1}
        out = [
            _sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            )
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                first: dict[str, Any] = {"type": "text", "text": ""}
                delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
            else:
                first = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            out.append(
                _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": first},
                )
            )
            out.append(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
            out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        out.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": n["completion"]},
                },
            )
        )
        out.append(_sse("message_stop", {"type": "message_stop"}))
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        return 200, headers, b"".join(out), "ok"


class _WireHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    scripted: _WireServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("scripted wire server: " + format, *args)

    def _send(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
        self.send_response(status)
        headers = {"Content-Type": "application/json", **headers}
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            data = {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
            self._send(200, {}, json.dumps(data).encode())
        else:
            self._send(404, {}, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        route = self.path.split("?")[0].rstrip("/")
        srv = self.scripted
        if not any(route.endswith(r) for r in srv.routes):
            self._send(404, {}, b'{"error": {"message": "not found"}}')
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            self._send(400, {}, b'{"error": {"message": "request body is not JSON"}}')
            return
        if route.endswith("/count_tokens"):
            n = max(1, len(json.dumps(body.get("messages"))) // 4)
            self._send(200, {}, json.dumps({"input_tokens": n}).encode())
            return
        status, headers, data = srv.handle(
            lambda: srv.respond_wire(self.path, body),
            body,
            path=self.path,
            headers=dict(self.headers.items()),
        )
        if status < 0:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
            return
        self._send(status, headers, data)


__all__ = ["ScriptedMessagesServer", "ScriptedResponsesServer"]
