"""The fake API server's HTTP side: JSON replies, chunked watches, exec over websockets.

``ApiHandler`` does the plumbing and hands every request to its ``api``
(``FakeKubernetes.serve_request``); exec streams speak the ``v5.channel.k8s.io`` and
``v4.channel.k8s.io`` channel protocols (``pump``). ``Outage`` tracks the open
connections an API outage cuts.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import selectors
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar, Protocol

from dataspace.testing.fake_k8s.policy import status

logger = logging.getLogger(__name__)

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
REASONS = {
    409: "AlreadyExists",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
    404: "NotFound",
}
"""The ``reason`` of an injected error's ``Status`` body, by HTTP status."""


class Api(Protocol):
    """What answers the requests (the fake API server)."""

    def serve_request(self, handler: ApiHandler, method: str) -> None:
        """Answer one request through ``handler``."""


@dataclass
class Outage:
    """An API outage in progress (see ``FakeKubernetes.outage``)."""

    handler: type[ApiHandler] | None = None
    unavailable_until: float = 0.0
    over: threading.Event = field(default_factory=threading.Event)
    conns: set[socket.socket] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cut(self) -> None:
        """Cut every open client connection (a restarted server holds none)."""
        with self.lock:
            conns = list(self.conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class ApiHandler(BaseHTTPRequestHandler):
    """One connection to the fake API server (subclassed per server with its ``api``)."""

    protocol_version = "HTTP/1.1"
    api: ClassVar[Api]
    outage: ClassVar[Outage]

    def setup(self) -> None:
        """Count the connection among those an outage cuts."""
        super().setup()
        with self.outage.lock:
            self.outage.conns.add(self.connection)

    def finish(self) -> None:
        """Forget the connection (an outage may have cut it already)."""
        with self.outage.lock:
            self.outage.conns.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        """Requests go to the debug log."""
        logger.debug("fake k8s: " + format, *args)

    def reply(self, code: int, body: dict[str, Any]) -> None:
        """Answer with a JSON body."""
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_chunked(self) -> None:
        """Start a chunked answer (a watch)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        """Send one chunk."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def end_chunked(self) -> None:
        """End a chunked answer and the connection."""
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    def upgrade(self) -> str | None:
        """Answer the websocket upgrade; the channel protocol chosen (None: refused)."""
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        proto = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered), None)
        key = self.headers.get("Sec-WebSocket-Key")
        if proto is None or not key:
            self.reply(400, status(400, "BadRequest", "exec needs a websocket upgrade"))
            return None
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.close_connection = True
        return proto

    def do_GET(self) -> None:
        """Answer a GET request."""
        self.api.serve_request(self, "GET")

    def do_POST(self) -> None:
        """Answer a POST request."""
        self.api.serve_request(self, "POST")

    def do_DELETE(self) -> None:
        """Answer a DELETE request."""
        self.api.serve_request(self, "DELETE")


def pump(
    handler: ApiHandler,
    proc: subprocess.Popen[bytes],
    proto: str,
    record: dict[str, Any] | None = None,
) -> None:
    """Shuttle exec channels between the websocket and the process until it ends.

    ``record`` counts the bytes each way (``stdin_bytes``, ``output_bytes``).
    """
    record = record if record is not None else {"stdin_bytes": 0, "output_bytes": 0}
    sock = handler.connection
    rfile = handler.rfile
    send_lock = threading.Lock()

    def send(opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + n.to_bytes(2, "big")
        else:
            head += bytes([127]) + n.to_bytes(8, "big")
        with send_lock:
            sock.sendall(head + payload)

    def reader() -> None:
        try:
            while True:
                opcode, payload = _read_frame(rfile)
                if opcode == 8 or opcode is None:
                    break
                if opcode in (1, 2) and payload:
                    channel, data = payload[0], payload[1:]
                    if channel == 255 and proto.startswith("v5") and data[:1] == b"\x00":
                        if proc.stdin:
                            proc.stdin.close()
                    elif channel == 0 and proc.stdin and data:
                        record["stdin_bytes"] += len(data)
                        proc.stdin.write(data)
                        proc.stdin.flush()
        except (OSError, ValueError):
            pass

    threading.Thread(target=reader, daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, 1)
        sel.register(proc.stderr, selectors.EVENT_READ, 2)
        try:
            while sel.get_map():
                for key, _ in sel.select(timeout=0.5):
                    data = os.read(key.fd, 65536)
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    record["output_bytes"] += len(data)
                    send(2, bytes([key.data]) + data)
            code = proc.wait()
            if code < 0:  # killed by a signal: the runtime reports 128 + the signal
                code = 128 - code
            if code == 0:
                status = {"metadata": {}, "status": "Success"}
            else:
                status = {
                    "metadata": {},
                    "status": "Failure",
                    "reason": "NonZeroExitCode",
                    "message": f"command terminated with non-zero exit code: {code}",
                    "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
                }
            send(2, b"\x03" + json.dumps(status).encode())
            send(8, b"")
        except OSError:
            pass


def _read_frame(rfile: Any) -> tuple[int | None, bytes]:
    head = rfile.read(2)
    if len(head) < 2:
        return None, b""
    opcode = head[0] & 0x0F
    masked = head[1] & 0x80
    n = head[1] & 0x7F
    if n == 126:
        n = int.from_bytes(rfile.read(2), "big")
    elif n == 127:
        n = int.from_bytes(rfile.read(8), "big")
    mask = rfile.read(4) if masked else b""
    data = rfile.read(n)
    if masked:
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return opcode, data


__all__ = ["REASONS", "Api", "ApiHandler", "Outage", "pump"]
