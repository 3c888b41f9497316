"""A fault-injecting HTTP proxy on 127.0.0.1, put between a store and a moto server."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "date", "server"}


@dataclass
class Fault:
    """Answer ``status``/``code`` to the next ``times`` requests that ``match``.

    With ``after_forward`` the request first reaches the server (its effect happens) and
    only the answer is replaced, as when a response is lost on the way back.
    """

    times: int
    status: int = 503
    code: str = "SlowDown"
    match: Callable[[str, str, dict[str, str]], bool] = lambda method, path, headers: True
    after_forward: bool = False


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    injected: bool


@dataclass
class FaultProxy:
    """An HTTP proxy on 127.0.0.1 that forwards to ``upstream`` unless a fault applies."""

    upstream: str
    faults: list[Fault] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    endpoint: str = ""

    def add(self, fault: Fault) -> None:
        with self.lock:
            self.faults.append(fault)

    def take(self, method: str, path: str, headers: dict[str, str]) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.match(method, path, headers):
                    fault.times -= 1
                    return fault
        return None

    def requests(self, method: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if method is None or s.method == method]


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProxyServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    def _handle(self) -> None:
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items()}
        lowered = {k.lower(): v for k, v in headers.items()}
        fault = proxy.take(self.command, self.path, lowered)
        with proxy.lock:
            proxy.seen.append(Seen(self.command, self.path, lowered, fault is not None))
        if fault is not None and not fault.after_forward:
            self._answer_error(fault)
            return
        status, reason, resp_headers, data = self._forward(body, headers)
        if fault is not None:
            self._answer_error(fault)
            return
        self.send_response(status, reason)
        for name, value in resp_headers:
            if name.lower() not in _HOP_HEADERS:
                self.send_header(name, value)
        if self.command == "HEAD":
            upstream_length = dict((k.lower(), v) for k, v in resp_headers).get("content-length")
            self.send_header("Content-Length", upstream_length or "0")
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _forward(
        self, body: bytes, headers: dict[str, str]
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        target = urlsplit(self.server.proxy.upstream)
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in ("connection",)}
            conn.request(self.command, self.path, body=body, headers=sent)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.reason, resp.getheaders(), data
        finally:
            conn.close()

    def _answer_error(self, fault: Fault) -> None:
        payload = (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f"<Error><Code>{fault.code}</Code><Message>injected by the test proxy</Message>"
            "</Error>"
        ).encode()
        self.send_response(fault.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", "0" if self.command == "HEAD" else str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultProxy
