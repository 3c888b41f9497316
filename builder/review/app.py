"""The review server over HTTP: the standard library's threading server and a small router.

The JSON API lives under ``/api/``; ``/`` and ``/static/`` serve the console (no CDN, no
external request). Every ``/api/`` route except ``POST /api/login`` needs a session (an
HttpOnly, SameSite=Strict cookie, or ``Authorization: Bearer`` for scripts); state-changing
requests must be JSON and same-origin. What a user may see or do is decided by
:class:`builder.review.service.ReviewService`, never here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from builder.errors import ReviewError
from builder.review.service import SESSION_HOURS, ReviewService, User
from builder.review.taxonomy import modality_of, vocabulary
from dataspace.errors import DataSpaceError

logger = logging.getLogger(__name__)

COOKIE = "ds_review"
MAX_BODY = 256 << 20
_STATIC = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript",
    "console.css": "text/css",
}
_RAW_TYPES = {
    "csv": "text/plain; charset=utf-8",
    "json": "text/plain; charset=utf-8",
    "markdown": "text/plain; charset=utf-8",
    "pdf": "application/pdf",
    "sqlite": "application/octet-stream",
}
_VIDEO_TYPES = {".mp4": "video/mp4", ".webm": "video/webm"}
_CSP = (
    "default-src 'self'; img-src 'self' data: blob:; media-src 'self'; style-src 'self'; "
    "script-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'"
)

Handler = Callable[["_Request"], Any]


class _Request:
    def __init__(self, h: _HTTPHandler, user: User | None, match: re.Match[str]) -> None:
        self.h = h
        self.user = user
        self.match = match
        self.query = {k: v[-1] for k, v in parse_qs(urlsplit(h.path).query).items()}
        self._body: Any = None

    @property
    def task(self) -> str:
        return self.match.group("task")

    def arg(self, name: str) -> str:
        value = self.query.get(name)
        if value is None:
            raise ReviewError(f"query parameter {name!r} is required")
        return value

    def json(self) -> dict[str, Any]:
        if self._body is None:
            self._body = self.h.read_json()
        return self._body


class _Raw:
    """A non-JSON answer."""

    def __init__(self, body: bytes, content_type: str, *, sandbox: bool = True) -> None:
        self.body = body
        self.content_type = content_type
        self.sandbox = sandbox


class ReviewServer:
    """The review HTTP server for one service.

    Args:
        service: the review service.
        host: bind address (loopback by default).
        port: 0 picks a free port.
    """

    def __init__(self, service: ReviewService, host: str = "127.0.0.1", port: int = 0) -> None:
        self.service = service
        self.routes: list[tuple[str, re.Pattern[str], Handler, bool]] = []
        self._register()
        handler = type("_BoundHandler", (_HTTPHandler,), {"server_app": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        host, port = self.httpd.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{name}:{port}"

    def start(self) -> ReviewServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted."""
        self.httpd.serve_forever()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> ReviewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- routes ------------------------------------------------------------------------
    def route(
        self, method: str, pattern: str, *, public: bool = False
    ) -> Callable[[Handler], Handler]:
        """Register a handler for ``method`` and a path pattern (``{task}`` = a task id)."""
        rx = re.compile("^" + pattern.replace("{task}", r"(?P<task>task_\d+)") + "$")

        def deco(fn: Handler) -> Handler:
            self.routes.append((method, rx, fn, public))
            return fn

        return deco

    def _register(self) -> None:
        s = self.service
        r = self.route

        @r("GET", "/api/me")
        def me(q: _Request) -> Any:
            assert q.user is not None
            return {"name": q.user.name, "role": str(q.user.role)}

        @r("GET", "/api/vocabulary")
        def vocab(q: _Request) -> Any:
            return vocabulary()

        @r("GET", "/api/tasks")
        def tasks(q: _Request) -> Any:
            return s.task_list(_u(q))

        @r("GET", "/api/tasks/{task}")
        def task(q: _Request) -> Any:
            return s.task_view(_u(q), q.task)

        @r("GET", "/api/tasks/{task}/files")
        def files(q: _Request) -> Any:
            return s.list_files(_u(q), q.task)

        @r("GET", "/api/tasks/{task}/file")
        def file(q: _Request) -> Any:
            ws = s.workspace(_u(q), q.task)
            path = q.arg("path")
            local = ws.local_path(path)
            suffix = Path(path).suffix.lower()
            if suffix in _VIDEO_TYPES:
                return ("range", local, _VIDEO_TYPES[suffix])
            return _Raw(
                local.read_bytes(), _RAW_TYPES.get(modality_of(path), "application/octet-stream")
            )

        @r("GET", "/api/tasks/{task}/table")
        def table(q: _Request) -> Any:
            return s.workspace(_u(q), q.task).table(q.arg("path"))

        @r("GET", "/api/tasks/{task}/markdown")
        def markdown(q: _Request) -> Any:
            return {"html": s.workspace(_u(q), q.task).markdown(q.arg("path"))}

        @r("GET", "/api/tasks/{task}/pdf")
        def pdf(q: _Request) -> Any:
            ws = s.workspace(_u(q), q.task)
            return {"pages": ws.pdf_pages(q.arg("path"))}

        @r("GET", "/api/tasks/{task}/pdf/page")
        def pdf_page(q: _Request) -> Any:
            ws = s.workspace(_u(q), q.task)
            try:
                page = int(q.arg("page"))
            except ValueError:
                raise ReviewError("page: a page number") from None
            return _Raw(ws.pdf_page_png(q.arg("path"), page), "image/png")

        @r("POST", "/api/tasks/{task}/sqlite")
        def sqlite(q: _Request) -> Any:
            body = q.json()
            return s.workspace(_u(q), q.task).sqlite_query(
                str(body.get("path")), str(body.get("sql") or "")
            )

        @r("POST", "/api/tasks/{task}/phase1")
        def phase1(q: _Request) -> Any:
            return s.submit_phase1(_u(q), q.task, q.json())

        @r("GET", "/api/tasks/{task}/gold")
        def gold(q: _Request) -> Any:
            return s.gold_view(_u(q), q.task)

        @r("POST", "/api/tasks/{task}/phase2")
        def phase2(q: _Request) -> Any:
            return s.submit_phase2(_u(q), q.task, q.json())

        @r("POST", "/api/tasks/{task}/phase2/check")
        def phase2_check(q: _Request) -> Any:
            return s.check_phase2(_u(q), q.task, q.json())

        @r("GET", "/api/tasks/{task}/records")
        def records(q: _Request) -> Any:
            return s.records_view(_u(q), q.task)

        @r("GET", "/api/tasks/{task}/messages")
        def messages(q: _Request) -> Any:
            return s.messages_view(_u(q), q.task)

        @r("POST", "/api/tasks/{task}/messages")
        def post_message(q: _Request) -> Any:
            return s.post_message(_u(q), q.task, q.json())

        @r("GET", "/api/tasks/{task}/sql")
        def sql(q: _Request) -> Any:
            return s.source_sql(_u(q), q.task)

        @r("GET", "/api/tasks/{task}/ledger")
        def ledger(q: _Request) -> Any:
            return s.ledger_view(_u(q), q.task)

        @r("GET", "/api/tasks/{task}/events")
        def events(q: _Request) -> Any:
            return s.task_events(_u(q), q.task)

        @r("POST", "/api/tasks/{task}/repair")
        def repair(q: _Request) -> Any:
            return s.repair(_u(q), q.task, q.json())

        @r("POST", "/api/tasks/{task}/accept")
        def accept(q: _Request) -> Any:
            return s.accept(_u(q), q.task)

        @r("POST", "/api/tasks/{task}/adjudicate")
        def adjudicate(q: _Request) -> Any:
            return s.adjudicate(_u(q), q.task, q.json())

        @r("POST", "/api/tasks/{task}/reopen")
        def reopen(q: _Request) -> Any:
            return s.reopen(_u(q), q.task, q.json())

        @r("GET", "/api/tasks/{task}/diff")
        def diff(q: _Request) -> Any:
            try:
                version = int(q.arg("version"))
            except ValueError:
                raise ReviewError("version: a version number") from None
            return s.version_diff_view(_u(q), q.task, version)

        @r("POST", "/api/tasks/{task}/remove")
        def remove(q: _Request) -> Any:
            return s.remove(_u(q), q.task, str(q.json().get("reason") or ""))

        @r("POST", "/api/tasks/{task}/assign")
        def assign(q: _Request) -> Any:
            return s.assign(_u(q), q.task, str(q.json().get("reviewer") or ""))

        @r("POST", "/api/tasks/{task}/unassign")
        def unassign(q: _Request) -> Any:
            return s.unassign(_u(q), q.task, str(q.json().get("reviewer") or ""))

        @r("GET", "/api/status")
        def status(q: _Request) -> Any:
            _admin(q)
            return s.status()

        @r("GET", "/api/stats")
        def stats(q: _Request) -> Any:
            from builder.review.stats import review_stats

            _admin(q)
            return review_stats(s.events())


def _u(q: _Request) -> User:
    assert q.user is not None
    return q.user


def _admin(q: _Request) -> None:
    if _u(q).role != "admin":
        raise ReviewError("for administrators", status=403)


class _HTTPHandler(BaseHTTPRequestHandler):
    server_app: ReviewServer
    protocol_version = "HTTP/1.1"
    server_version = "dataspace-review"
    sys_version = ""

    def finish(self) -> None:
        # One thread serves one HTTP connection: its database connection ends with it.
        try:
            super().finish()
        finally:
            self.server_app.service.db.release()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    # ---- plumbing --------------------------------------------------------------------
    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", _CSP)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", headers)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    def _read_body(self) -> None:
        """Read the whole request body first, so a keep-alive connection stays in step."""
        self._raw_body = b""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise ReviewError("bad Content-Length") from None
        if length > MAX_BODY or length < 0:
            self.close_connection = True
            raise ReviewError(f"request body over {MAX_BODY >> 20} MiB", status=413)
        self._raw_body = self.rfile.read(length) if length else b""

    def read_json(self) -> dict[str, Any]:
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise ReviewError("requests that change anything send application/json", status=415)
        raw = self._raw_body or b"{}"
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ReviewError(f"request body is not JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise ReviewError("request body must be a JSON object")
        return obj

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth[7:].strip() or None
        cookie = SimpleCookie()
        try:
            cookie.load(self.headers.get("Cookie", ""))
        except Exception:
            return None
        morsel = cookie.get(COOKIE)
        return morsel.value if morsel else None

    def _same_origin(self) -> bool:
        origin = self.headers.get("Origin")
        if origin is None:  # not a browser (browsers send Origin on every POST)
            return True
        host = self.headers.get("Host", "")
        return urlsplit(origin).netloc == host

    # ---- dispatch ----------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        with contextlib.suppress(ReviewError):
            self._read_body()
        self._error(405, "method not allowed")

    do_DELETE = do_PATCH = do_PUT

    def _dispatch(self, method: str) -> None:
        try:
            self._read_body()
            self._dispatch_inner(method)
        except ReviewError as exc:
            self._error(exc.status, str(exc))
        except DataSpaceError as exc:
            self._error(400, str(exc))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # a bug: logged, and the client gets no internals
            logger.exception("review server error on %s %s", method, self.path)
            self._error(500, f"internal error ({type(exc).__name__})")

    def _dispatch_inner(self, method: str) -> None:
        path = urlsplit(self.path).path
        app = self.server_app
        if method == "GET" and path == "/favicon.ico":
            self._send(204, b"", "image/x-icon")
            return
        if method == "GET" and (path == "/" or path.startswith("/static/")):
            self._static(path)
            return
        if path == "/api/login" and method == "POST":
            self._login()
            return
        if path == "/api/logout" and method == "POST":
            token = self._token()
            if token:
                app.service.logout(token)
            self._json(
                200,
                {"ok": True},
                {"Set-Cookie": f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"},
            )
            return
        if not path.startswith("/api/"):
            self._error(404, "not found")
            return
        user = app.service.authenticate(self._token())
        if method == "POST" and not self._same_origin():
            raise ReviewError("cross-origin request refused", status=403)
        for m, rx, fn, _public in app.routes:
            match = rx.match(path)
            if match and m == method:
                result = fn(_Request(self, user, match))
                if isinstance(result, _Raw):
                    headers = {"Content-Security-Policy": "sandbox"} if result.sandbox else {}
                    self._send_raw(result, headers)
                elif isinstance(result, tuple) and result and result[0] == "range":
                    self._send_range(result[1], result[2])
                else:
                    self._json(200, result)
                return
        self._error(404, "no such endpoint")

    def _send_raw(self, raw: _Raw, headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", raw.content_type)
        self.send_header("Content-Length", str(len(raw.body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(raw.body)

    def _send_range(self, local: Path, content_type: str) -> None:
        size = local.stat().st_size
        start, end = 0, size - 1
        status = 200
        rng = self.headers.get("Range", "")
        m = re.match(r"bytes=(\d*)-(\d*)$", rng.strip())
        if m and (m.group(1) or m.group(2)):
            if m.group(1):
                start = int(m.group(1))
                end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            else:
                start = max(0, size - int(m.group(2)))
            if start > end or start >= size:
                self._send(416, b"", "text/plain", {"Content-Range": f"bytes */{size}"})
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            return
        with local.open("rb") as fh:
            fh.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = fh.read(min(left, 1 << 16))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def _login(self) -> None:
        if not self._same_origin():
            raise ReviewError("cross-origin request refused", status=403)
        body = self.read_json()
        token = self.server_app.service.login(
            str(body.get("name") or ""), str(body.get("password") or "")
        )
        user = self.server_app.service.authenticate(token)
        cookie = (
            f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_HOURS * 3600}"
        )
        self._json(200, {"name": user.name, "role": str(user.role)}, {"Set-Cookie": cookie})

    def _static(self, path: str) -> None:
        name = "index.html" if path == "/" else path[len("/static/") :]
        if name not in _STATIC:
            self._error(404, "not found")
            return
        body = resources.files("builder.review").joinpath("static", name).read_bytes()
        self._send(200, body, _STATIC[name])


def serve(service: ReviewService, host: str, port: int) -> ReviewServer:
    """A server bound to ``host:port`` (not yet serving)."""
    return ReviewServer(service, host, port)


__all__ = ["COOKIE", "ReviewServer", "serve"]
