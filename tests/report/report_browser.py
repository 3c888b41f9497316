"""A minimal headless-Chromium driver over the DevTools protocol on a pipe (stdlib only).

Chromium is started with ``--remote-debugging-pipe``: it reads JSON commands on fd 3 and
writes replies and events on fd 4, each message ending in a NUL byte. Host resolution is
mapped to nothing, so a page cannot reach any network even if it tried.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# What Runtime.evaluate answers when the document it runs in goes away under it.
CUT_OFF_BY_NAVIGATION = (
    "Inspected target navigated or closed",
    "Execution context was destroyed",
    "Cannot find context with specified id",
)


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageLoad:
    url: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


class Browser:
    def __init__(self, executable: str, *, allow_hosts: tuple[str, ...] = ()) -> None:
        # ``allow_hosts``: loopback addresses a page may reach (a server the test started).
        rules = ", ".join(["MAP * ~NOTFOUND", *(f"EXCLUDE {h}" for h in allow_hosts)])
        self._profile = tempfile.mkdtemp(prefix="ds-chromium-")
        cmd_r, cmd_w = os.pipe()  # we write commands, chromium reads fd 3
        ev_r, ev_w = os.pipe()  # chromium writes fd 4, we read
        fds = (os.dup(cmd_r), os.dup(ev_w))  # high numbers, so dup2 below cannot clobber

        def child_fds() -> None:
            os.dup2(fds[0], 3)
            os.dup2(fds[1], 4)

        args = [
            executable,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--mute-audio",
            "--allow-file-access-from-files",
            f"--host-resolver-rules={rules}",
            f"--user-data-dir={self._profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=child_fds,
            close_fds=False,
        )
        for fd in (cmd_r, ev_w, *fds):
            os.close(fd)
        self._w = os.fdopen(cmd_w, "wb", buffering=0)
        self._r = os.fdopen(ev_r, "rb", buffering=0)
        self._next = 0
        self._lock = threading.Lock()
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = self._r.read(65536)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        q = self._replies.get(msg["id"])
                    if q is not None:
                        q.put(msg)
                else:
                    self.events.put(msg)

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        with self._lock:
            self._next += 1
            mid = self._next
            q: queue.Queue[dict[str, Any]] = queue.Queue()
            self._replies[mid] = q
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._w.write(json.dumps(msg).encode() + b"\0")
        reply = q.get(timeout=timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def new_page(self) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1366, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        return page

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.send("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self._profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str) -> None:
        self.b = browser
        self.session = session

    def _drain(self, load: PageLoad, until: str | None, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if until:
                    raise TimeoutError(f"{load.url}: no {until} within {timeout} s")
                return
            try:
                ev = self.b.events.get(timeout=min(left, 0.2))
            except queue.Empty:
                if until is None:
                    return
                continue
            if ev.get("sessionId") != self.session:
                continue
            method, p = ev.get("method"), ev.get("params", {})
            if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                load.errors.append(
                    "console: "
                    + " ".join(
                        str(a.get("value", a.get("description", ""))) for a in p.get("args", [])
                    )
                )
            elif method == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                load.errors.append(
                    "exception: " + str(d.get("exception", {}).get("description", d.get("text")))
                )
            elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                e = p["entry"]
                load.errors.append(f"log: {e.get('text')} {e.get('url', '')}")
            elif method == "Network.requestWillBeSent":
                load.requests.append(p.get("request", {}).get("url", ""))
            elif method == "Network.loadingFailed":
                load.errors.append(f"network: {p.get('errorText')}")
            if until and method == until:
                return

    def goto(self, url: str, timeout: float = 30.0) -> PageLoad:
        load = PageLoad(url=url)
        self.b.send("Page.navigate", {"url": url}, session=self.session)
        self._drain(load, "Page.loadEventFired", timeout)
        self._drain(load, None, 0.5)  # late console messages and exceptions
        return load

    def settle(self, load: PageLoad, seconds: float = 0.3) -> PageLoad:
        """Collect console errors and requests that came after the load event."""
        self._drain(load, None, seconds)
        return load

    def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll until ``expression`` is truthy; returns its value.

        A poll may span a navigation (a page that reloads itself): an evaluation the
        navigation cuts off counts as "not yet" and the poll goes on in the new document.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.eval(expression)
            except RuntimeError as e:
                if not any(s in str(e) for s in CUT_OFF_BY_NAVIGATION):
                    raise
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} still false after {timeout} s")
            time.sleep(0.05)

    def eval(self, expression: str) -> Any:
        res = self.b.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=self.session,
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def set_viewport(self, width: int, height: int = 900) -> None:
        """Lay the page out as on a screen ``width`` CSS pixels wide."""
        self.b.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )

    def screenshot(self, path: str, *, max_height: int = 5000) -> None:
        metrics = self.b.send("Page.getLayoutMetrics", session=self.session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        clip = {
            "x": 0,
            "y": 0,
            "width": min(size["width"], 1366),
            "height": min(size["height"], max_height),
            "scale": 1,
        }
        res = self.b.send(
            "Page.captureScreenshot",
            {"format": "png", "clip": clip, "captureBeyondViewport": True},
            session=self.session,
        )
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(res["data"]))
