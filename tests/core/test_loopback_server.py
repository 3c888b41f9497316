"""The loopback fakes' HTTP server never prints: a client that hangs up is a debug record."""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from dataspace.testing.scripted_server import LoopbackHTTPServer


class _Handler(BaseHTTPRequestHandler):
    raise_error: type[BaseException] = BrokenPipeError
    handled = threading.Event()

    def do_GET(self) -> None:
        try:
            raise self.raise_error("the client went away")
        finally:
            type(self).handled.set()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize(
    ("error", "level"),
    [(BrokenPipeError, logging.DEBUG), (ConnectionResetError, logging.DEBUG),
     (ValueError, logging.ERROR)],
)  # fmt: skip
def test_handler_errors_are_logged_not_printed(
    error: type[BaseException], level: int, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    handled = threading.Event()
    handler = type("Handler", (_Handler,), {"raise_error": error, "handled": handled})
    server = LoopbackHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    caplog.set_level(logging.DEBUG, logger="dataspace.testing.scripted_server")
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as client:
            me = str(client.getsockname())  # other servers of this process log here too
            client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert handled.wait(10)
            client.settimeout(10)
            assert client.recv(1024) == b""  # the server closed the connection
    finally:
        server.shutdown()
        server.server_close()
    records = [
        r
        for r in caplog.records
        if r.name == "dataspace.testing.scripted_server" and me in r.getMessage()
    ]
    assert [r.levelno for r in records] == [level]
    assert "Exception occurred during processing" not in capfd.readouterr().err
