"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for agent tests.

It stands in for a paid model endpoint: it plays back per-task scripts of tool calls and
replies, reports usage in every reply, and injects faults (429 with ``Retry-After``, 500,
slow replies, malformed replies, dropped connections) on demand.

Scripts. ``scripts`` maps a script name (usually a task id such as ``task_1``) to a list of
steps. The script of a request is the one whose name appears in its first user message
(the longest name wins; ``"*"`` is the fallback). The step is the number of assistant
messages already in the conversation, so retries and resumed attempts replay the same
step. A step is a mapping::

    {"tool_calls": [{"name": "bash", "arguments": {"command": "ls /workspace"}}],
     "content": "optional text",
     "usage": {"prompt_tokens": 120, "completion_tokens": 30,
               "cached_tokens": 100, "reasoning_tokens": 10},   # optional
     "delay": 0.0,                                               # seconds before replying
     "faults": [{"status": 429, "retry_after": 0.05, "times": 3},
                {"malformed": "not_json", "times": 1}]}

``arguments`` may be a raw string (sent as is, e.g. invalid JSON). ``{"shell": "ls"}``
calls the request's own shell tool (``shell_call``). Faults are served, in
order, to the first requests of that step (``times`` each) before the real reply. Fault
kinds: ``status`` (any HTTP status, optional ``retry_after``), ``malformed`` (``not_json``,
``no_choices``), ``drop`` (close the connection without answering), ``delay`` (a slow
reply) and ``wait`` (hold the reply until the test calls ``open_gate(name)``, at most
``timeout`` seconds, default 300: a call known to be in progress). When a script runs
out, the server replies with text and no tool call.

Outages. ``kill()`` stops the server as a crash would: the port closes, every open
connection is cut and every held reply is dropped unsent (nothing of it is counted);
``start()`` again with ``port_request = port`` brings it back on the same port.

Without explicit usage, a step reports deterministic counts derived from the request and
reply sizes. ``ScriptedServer.reported`` sums what was reported, per script.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

FALLBACK = "*"
KILL_SETTLE_SECONDS = 10.0
"""How long ``kill`` waits for the handlers it woke to record their requests."""


class LoopbackHTTPServer(ThreadingHTTPServer):
    """The threading HTTP server of the loopback fakes; it never prints.

    A client that hangs up before its reply is written (an attempt killed mid-call) is
    logged at debug level; any other handler error is logged with its traceback, where
    ``socketserver`` would print both to stderr.
    """

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (BrokenPipeError, ConnectionResetError)):
            logger.debug("loopback server: client %s hung up: %s", client_address, error)
        else:
            logger.exception("loopback server: request from %s failed", client_address)

    @classmethod
    def serve(
        cls, handler: type[BaseHTTPRequestHandler], *, name: str, port: int = 0
    ) -> tuple[LoopbackHTTPServer, threading.Thread]:
        """Bind ``port`` (0: a free one) on 127.0.0.1 and serve in a started daemon thread."""
        httpd = cls(("127.0.0.1", port), handler)
        thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )
        thread.start()
        return httpd, thread


@dataclass(kw_only=True)
class Reported:
    """Usage the server reported for one script (sums over successful replies)."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    replies: int = 0
    faults: int = 0


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """One request as the server received it."""

    script: str | None
    step: int
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]
    outcome: str
    at: float = field(default_factory=time.monotonic)
    raw: bytes = b""  # the body's bytes as they arrived


class ScriptedServer:
    """Context manager serving scripted chat completions on ``127.0.0.1``.

    Args:
        scripts: script name -> steps (see the module docstring).
        latency: seconds added before every reply (a slow model).
        exhausted_reply: the text sent when a script has no step left.
        models: when given, the only model ids served; any other gets the 404 a gateway
            sends for an unknown model.

    Example::

        with ScriptedServer({"task_1": [...]}) as server:
            client = MeteredClient(ModelSpec(id="scripted", base_url=server.url))
    """

    def __init__(
        self,
        scripts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        *,
        latency: float = 0.0,
        exhausted_reply: str = "I have nothing more to do.",
        models: Sequence[str] | None = None,
    ) -> None:
        self.scripts: dict[str, list[Mapping[str, Any]]] = {
            k: list(v) for k, v in (scripts or {}).items()
        }
        self.latency = latency
        self.exhausted_reply = exhausted_reply
        self.models = None if models is None else frozenset(models)
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.reported: dict[str, Reported] = {}
        self._served: dict[tuple[str | None, int], int] = {}
        self._gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.port_request = 0  # the port start() binds (0: any free port)
        self._lives = 0  # kill() counts up: a reply held across a kill is never sent
        self._conns: set[socket.socket] = set()
        self._httpd: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        """Bind ``port_request`` (default: a free port) on 127.0.0.1; serve in a daemon thread."""
        server = self

        class Handler(_Handler):
            scripted = server

        self._httpd, self._thread = LoopbackHTTPServer.serve(
            Handler, name="scripted-model-server", port=self.port_request
        )
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def kill(self) -> None:
        """Stop as a crashed server: port closed, connections cut, held replies never sent."""
        with self._lock:
            self._lives += 1
        self.stop()
        with self._lock:
            conns = list(self._conns)
            gates = list(self._gates.values())
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for gate in gates:  # held handlers wake, see the kill and hang up
            gate.set()
        # and have recorded their requests when this returns: a request taken before the
        # kill is never counted as one that came after it
        deadline = time.monotonic() + KILL_SETTLE_SECONDS
        while time.monotonic() < deadline:
            with self._lock:
                if self.in_flight == 0:
                    return
            time.sleep(0.005)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def set_script(self, name: str, steps: Sequence[Mapping[str, Any]]) -> None:
        """Add or replace one script."""
        with self._lock:
            self.scripts[name] = list(steps)

    def _gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def open_gate(self, name: str) -> None:
        """Release every reply held by a ``wait`` fault on gate ``name`` (now and later)."""
        self._gate(name).set()

    def handle(
        self,
        respond: Callable[[], tuple[int, dict[str, str], bytes, str]],
        body: Mapping[str, Any],
        *,
        path: str,
        headers: Mapping[str, str],
        raw: bytes = b"",
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body of ``respond()`` for one request, which is recorded.

        The request counts as in flight until it is recorded: ``kill`` waits for both.
        """
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, out_headers, data, outcome = respond()
            name, step = self._select(body)
            with self._lock:
                self.requests.append(
                    RecordedRequest(
                        script=name,
                        step=step,
                        path=path,
                        headers=dict(headers),
                        body=body,
                        outcome=outcome,
                        raw=raw,
                    )
                )
        finally:
            with self._lock:
                self.in_flight -= 1
        return status, out_headers, data

    def served(self, script: str | None, step: int) -> int:
        """How many requests for ``step`` of ``script`` have arrived (counted on arrival)."""
        with self._lock:
            return self._served.get((script, step), 0)

    def totals(self, script: str | None = None) -> Reported:
        """Reported usage of one script, or of all scripts summed."""
        with self._lock:
            items = (
                [self.reported.get(script, Reported())]
                if script is not None
                else list(self.reported.values())
            )
        out = Reported()
        for r in items:
            for f in out.__dataclass_fields__:
                setattr(out, f, getattr(out, f) + getattr(r, f))
        return out

    # ---- the reply logic ---------------------------------------------------------------------
    def _select(self, body: Mapping[str, Any]) -> tuple[str | None, int]:
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        first_user = next(
            (m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None
        )
        text = _text(first_user.get("content")) if first_user else ""
        names = sorted((k for k in self.scripts if k != FALLBACK), key=len, reverse=True)
        name = next(
            (k for k in names if re.search(rf"(?<![\w]){re.escape(k)}(?![\w])", text)),
            FALLBACK if FALLBACK in self.scripts else None,
        )
        step = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        return name, step

    def _fault(self, name: str | None, step: int, spec: Mapping[str, Any]) -> Mapping | None:
        faults = spec.get("faults") or []
        with self._lock:
            n = self._served.get((name, step), 0)
            self._served[(name, step)] = n + 1
        for f in faults:
            times = int(f.get("times", 1))
            if n < times:
                return f
            n -= times
        return None

    def respond(self, body: Mapping[str, Any]) -> tuple[int, dict[str, str], bytes, str]:
        """Status, headers, body and outcome label for one request (no I/O)."""
        model = body.get("model")
        if self.models is not None and model not in self.models:
            unknown = {"error": {"message": f"model {model!r} not found", "type": "not_found"}}
            return 404, {}, json.dumps(unknown).encode(), "unknown_model"
        life = self._lives
        name, step = self._select(body)
        steps = self.scripts.get(name, []) if name is not None else []
        spec: Mapping[str, Any] = steps[step] if step < len(steps) else {}
        fault = self._fault(name, step, spec)
        if fault is not None:
            with self._lock:
                self.reported.setdefault(name or "", Reported()).faults += 1
            if "wait" in fault:
                gate = self._gate(str(fault["wait"]))
                if self._lives == life:  # else killed before the gate existed to be opened
                    gate.wait(timeout=float(fault.get("timeout", 300)))
                if self._lives != life:  # the server was killed meanwhile
                    return -1, {}, b"", "killed"
            elif "delay" in fault and not ({"status", "malformed", "drop"} & set(fault)):
                time.sleep(float(fault["delay"]))
            elif "status" in fault:
                status = int(fault["status"])
                headers = {}
                if fault.get("retry_after") is not None:
                    headers["Retry-After"] = str(fault["retry_after"])
                err = {
                    "error": {
                        "message": f"scripted fault {status}",
                        "type": "scripted",
                        "code": status,
                    }
                }
                return status, headers, json.dumps(err).encode(), f"fault:{status}"
            elif fault.get("malformed") == "no_choices":
                return (
                    200,
                    {},
                    json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode(),
                    "fault:malformed",
                )
            elif "malformed" in fault:
                return 200, {}, b"{this is not json", "fault:malformed"
            elif fault.get("drop"):
                return -1, {}, b"", "fault:drop"
        delay = float(spec.get("delay", 0.0)) + self.latency
        if delay > 0:
            time.sleep(delay)
        if spec.get("shell") is not None:
            spec = {
                **spec,
                "tool_calls": [
                    *(spec.get("tool_calls") or []),
                    shell_call(body, str(spec["shell"])),
                ],
            }
        message = self._message(spec, step, len(steps))
        usage = self._usage(spec, body, message)
        with self._lock:
            r = self.reported.setdefault(name or "", Reported())
            r.prompt_tokens += usage["prompt_tokens"]
            r.cached_tokens += usage["prompt_tokens_details"]["cached_tokens"]
            r.completion_tokens += usage["completion_tokens"]
            r.reasoning_tokens += usage["completion_tokens_details"]["reasoning_tokens"]
            r.replies += 1
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "scripted")),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                }
            ],
            "usage": usage,
        }
        return 200, {}, json.dumps(payload, ensure_ascii=False).encode(), "ok"

    def _message(self, spec: Mapping[str, Any], step: int, n_steps: int) -> dict[str, Any]:
        if not spec:
            return {"role": "assistant", "content": self.exhausted_reply}
        msg: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
        calls = []
        for i, c in enumerate(spec.get("tool_calls") or []):
            args = c.get("arguments", {})
            calls.append(
                {
                    "id": c.get("id", f"call_{step}_{i}"),
                    "type": "function",
                    "function": {
                        "name": c.get("name", ""),
                        "arguments": args
                        if isinstance(args, str)
                        else json.dumps(args, ensure_ascii=False),
                    },
                }
            )
        if calls:
            msg["tool_calls"] = calls
        return msg

    @staticmethod
    def _usage(
        spec: Mapping[str, Any], body: Mapping[str, Any], message: Mapping[str, Any]
    ) -> dict[str, Any]:
        u = spec.get("usage") or {}
        prompt = int(u.get("prompt_tokens", max(1, len(json.dumps(body.get("messages"))) // 4)))
        completion = int(u.get("completion_tokens", max(1, len(json.dumps(message)) // 4)))
        cached = int(u.get("cached_tokens", prompt // 2))
        reasoning = int(u.get("reasoning_tokens", completion // 3))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }


def shell_call(body: Mapping[str, Any], command: str) -> dict[str, Any]:
    """A tool call running ``command`` with the request's shell tool.

    The shell tool is the first function tool whose parameters take ``command`` (or
    ``cmd``); a step written as ``{"shell": "ls"}`` works with any harness's tool names.

    >>> shell_call({"tools": [{"type": "function", "function": {"name": "run",
    ...     "parameters": {"properties": {"cmd": {}}}}}]}, "ls")
    {'name': 'run', 'arguments': {'cmd': 'ls'}}
    """
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        props = ((fn or {}).get("parameters") or {}).get("properties") or {}
        for key in ("command", "cmd"):
            if key in props:
                return {"name": fn["name"], "arguments": {key: command}}  # type: ignore[index]
    return {"name": "bash", "arguments": {"command": command}}


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    scripted: ScriptedServer

    def setup(self) -> None:
        super().setup()
        # one reply is headers + body in two writes: without this, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every call
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.scripted._lock:
            self.scripted._conns.add(self.connection)

    def finish(self) -> None:
        with self.scripted._lock:
            self.scripted._conns.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("scripted server: " + format, *args)

    def _send(self, status: int, headers: Mapping[str, str], data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(
                200,
                {},
                json.dumps(
                    {"object": "list", "data": [{"id": "scripted", "object": "model"}]}
                ).encode(),
            )
        else:
            self._send(404, {}, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {}, b'{"error": {"message": "not found"}}')
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            self._send(400, {}, b'{"error": {"message": "request body is not JSON"}}')
            return
        srv = self.scripted
        status, headers, data = srv.handle(
            lambda: srv.respond(body),
            body,
            path=self.path,
            headers=dict(self.headers.items()),
            raw=raw,
        )
        if status < 0:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
            return
        self._send(status, headers, data)


def load_scripts(path: str) -> dict[str, Any]:
    """The scripts of a JSON file (script name -> list of steps), for serving by hand.

    Raises:
        ConfigError: the file cannot be read, is not JSON, or is not an object.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            scripts = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read scripts: {exc}") from exc
    if not isinstance(scripts, dict):
        raise ConfigError(f"{path}: expected an object of script name -> steps")
    return scripts


__all__ = [
    "FALLBACK",
    "RecordedRequest",
    "Reported",
    "ScriptedServer",
    "load_scripts",
    "shell_call",
]


if __name__ == "__main__":  # the command line lives with the others, in dataspace.cli
    from dataspace.cli.scripted_server import main

    raise SystemExit(main())
