"""A file bridge that carries HTTP requests from inside a sandbox to the host's relay.

The sandbox has no network (not even loopback), so a harness inside it cannot reach the
relay over TCP. The bridge uses only the sandbox contract (``exec``, ``read_file``,
``write_file``), so it works for every backend:

1. inside, the harness's HTTP transport writes ``<dir>/req-<id>.json`` (an envelope:
   method, path, headers, body; written to ``.tmp`` and renamed) and waits for
   ``<dir>/resp-<id>.done``;
2. on the host, a pump thread runs a tiny waiter inside the sandbox (``exec``) that renames
   new requests to ``.claimed`` and prints their ids; the pump reads each claimed envelope
   (``read_file``), answers it with ``Relay.handle`` and writes ``resp-<id>.json`` then
   ``resp-<id>.done`` (``write_file``).

Only the relay's token crosses the bridge; the real key never enters the sandbox. The
waiter also returns when ``<dir>/stop`` exists, which ``stop()`` writes. Between waits the
pump calls ``on_idle`` (the adapter's wall-clock watchdog).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dataspace.errors import SandboxClosedError, SandboxError

logger = logging.getLogger(__name__)

MAX_ENVELOPE_BYTES = 64 * 1024 * 1024

_WAITER = r"""
import os, sys, time
d, wait = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + wait
while True:
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        names = []
    got = []
    for n in sorted(names):
        if n.startswith("req-") and n.endswith(".json"):
            src = os.path.join(d, n)
            try:
                os.rename(src, src[:-5] + ".claimed")
                got.append(n[4:-5])
            except OSError:
                pass
    if got or "stop" in names or time.monotonic() >= end:
        print("\n".join(got + (["STOP"] if "stop" in names else [])))
        break
    time.sleep(0.004)
"""


class SandboxBridge:
    """Pumps requests from a sandbox folder to a relay.

    Args:
        sandbox: the live sandbox.
        relay: anything with ``handle(method, path, headers, body) -> RelayResponse``.
        directory: the bridge folder inside the sandbox (under /output).
        on_idle: called between waits (e.g. a watchdog); may return False to stop pumping.
        wait_seconds: how long one waiter runs before returning empty.
    """

    def __init__(
        self,
        sandbox: Any,
        relay: Any,
        directory: str,
        *,
        on_idle: Callable[[], bool] | None = None,
        wait_seconds: float = 1.0,
    ) -> None:
        self.sandbox = sandbox
        self.relay = relay
        self.directory = directory.rstrip("/")
        self.on_idle = on_idle
        self.wait_seconds = wait_seconds
        self.requests = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="relay-bridge")

    def prepare(self) -> None:
        """Create the bridge folder inside the sandbox, owned by the sandbox's user."""
        res = self.sandbox.exec(["mkdir", "-p", self.directory], timeout=30.0)
        if res.exit_code != 0:
            raise SandboxError(f"cannot create {self.directory} in the sandbox: {res.stderr}")

    def start(self) -> None:
        """Start the pump thread."""
        self._thread = threading.Thread(target=self._pump, name="relay-bridge-pump", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop pumping (answers in flight are finished first)."""
        self._stop.set()
        with contextlib.suppress(OSError, SandboxError):
            self.sandbox.write_file(f"{self.directory}/stop", b"")
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._pool.shutdown(wait=True)

    def _pump(self) -> None:
        while not self._stop.is_set():
            if self.on_idle is not None and self.on_idle() is False:
                break
            try:
                res = self.sandbox.exec(
                    ["python3", "-I", "-S", "-c", _WAITER, self.directory, str(self.wait_seconds)],
                    timeout=self.wait_seconds + 30.0,
                )
            except SandboxClosedError:
                return
            except SandboxError as exc:
                self.failures.append(str(exc))
                logger.warning("relay bridge waiter failed: %s", exc)
                return
            if res.status == "deadline":
                return
            for rid in res.stdout.split():
                if rid == "STOP":
                    return
                self.requests += 1
                self._pool.submit(self._answer, rid)

    def _answer(self, rid: str) -> None:
        base = f"{self.directory}/req-{rid}.claimed"
        try:
            raw = self.sandbox.read_file(base, max_bytes=MAX_ENVELOPE_BYTES)
            env = json.loads(raw)
            resp = self.relay.handle(
                str(env.get("method", "POST")),
                str(env.get("path", "")),
                dict(env.get("headers") or {}),
                str(env.get("body", "")).encode("utf-8"),
            )
            out = {
                "status": resp.status,
                "headers": dict(resp.headers),
                "body": resp.body.decode("utf-8", "replace"),
            }
        except (OSError, ValueError) as exc:
            out = {
                "status": 400,
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps({"error": {"message": f"bad bridge request: {exc}"}}),
            }
        except SandboxError as exc:
            self.failures.append(str(exc))
            return
        except Exception as exc:  # never leave the harness waiting for an answer
            logger.exception("relay bridge failed on request %s", rid)
            out = {
                "status": 500,
                "headers": {"Content-Type": "application/json"},
                "body": json.dumps({"error": {"message": f"relay failure: {exc}"}}),
            }
        try:
            self.sandbox.write_file(f"{self.directory}/resp-{rid}.json", json.dumps(out).encode())
            self.sandbox.write_file(f"{self.directory}/resp-{rid}.done", b"")
        except (OSError, SandboxError) as exc:
            self.failures.append(str(exc))
            logger.warning("relay bridge could not answer %s: %s", rid, exc)


__all__ = ["SandboxBridge"]
