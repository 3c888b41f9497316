"""A researcher confirms or revises each proposed cause: from the CLI or a small console.

The console (``dataspace audit RUN --agent A --serve``) binds to loopback and requires the
random token printed at start; it shows each failed attempt's symptom, the proposal with
its cited trace event, and a form to confirm or choose another subtype.
"""

from __future__ import annotations

import html
import json
import logging
import secrets
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dataspace.errors import ConfigError
from dataspace.failure_taxonomy import STAGES, SUBTYPE_BY_CODE, SUBTYPES

logger = logging.getLogger(__name__)


class AuditFile:
    """The audit document of one agent in a run (read, changed, written back)."""

    def __init__(self, run: str, agent: str) -> None:
        from dataspace.report.load import open_run

        source = open_run(run)
        self.store = source.store
        prefix = source.prefix.strip("/")
        self.key = f"{prefix}/audit/{agent}/audit.json" if prefix else f"audit/{agent}/audit.json"
        self._lock = threading.Lock()
        try:
            self.doc: dict[str, Any] = json.loads(self.store.get_bytes(self.key))
        except Exception as exc:
            raise ConfigError(
                f"{self.store.url_for(self.key)}: no audit yet ({exc}); run "
                f"`dataspace audit {run} --agent {agent} --release REL` first"
            ) from exc

    def confirm(
        self, task_id: str, attempt: int, subtype: str, *, by: str, note: str = ""
    ) -> dict[str, Any]:
        """Record the human decision for one attempt (the proposal or a revision)."""
        code = subtype.strip().upper()
        if code not in SUBTYPE_BY_CODE:
            raise ConfigError(f"{subtype!r}: not a subtype ({', '.join(SUBTYPE_BY_CODE)})")
        with self._lock:
            for item in self.doc["items"]:
                if item["task_id"] == task_id and int(item["attempt"]) == attempt:
                    proposed = (item.get("proposal") or {}).get("subtype")
                    item["confirmed"] = {
                        "stage": code[0],
                        "subtype": code,
                        "revised": proposed != code,
                        "by": by,
                        "note": note,
                        "at": datetime.now(UTC)
                        .isoformat(timespec="seconds")
                        .replace("+00:00", "Z"),
                    }
                    self.save()
                    return dict(item["confirmed"])
        raise ConfigError(f"{task_id} attempt {attempt}: not in this audit")

    def save(self) -> None:
        """Write the document back."""
        data = (json.dumps(self.doc, ensure_ascii=False, indent=2) + "\n").encode()
        self.store.put_bytes(self.key, data)


def parse_decision(text: str) -> tuple[str, int, str]:
    """``task_3:1=M1`` (or ``task_3=M1`` for attempt 1) -> (task, attempt, subtype).

    >>> parse_decision("task_3:2=g4")
    ('task_3', 2, 'G4')
    """
    left, sep, code = text.partition("=")
    if not sep:
        raise ConfigError(f"{text!r}: write TASK[:ATTEMPT]=SUBTYPE, e.g. task_3=M1")
    task, _, att = left.partition(":")
    try:
        attempt = int(att) if att else 1
    except ValueError:
        raise ConfigError(f"{text!r}: the attempt must be a number") from None
    return task.strip(), attempt, code.strip().upper()


@dataclass(frozen=True, kw_only=True)
class Decision:
    """One recorded decision: the attempt, the subtype and whether it revised the proposal."""

    task_id: str
    attempt: int
    subtype: str
    revised: bool


def confirm_decisions(
    run: str, agent: str, decisions: Iterable[str], *, by: str, note: str = ""
) -> Iterator[Decision]:
    """Record each ``TASK[:ATTEMPT]=SUBTYPE`` decision in turn, yielding it once written.

    Raises:
        ConfigError: no audit of the agent yet, a malformed decision, an unknown subtype or
            an attempt the audit does not hold (the decisions before it stay recorded).
    """
    audit = AuditFile(run, agent)
    for text in decisions:
        task, attempt, code = parse_decision(text)
        c = audit.confirm(task, attempt, code, by=by, note=note)
        yield Decision(task_id=task, attempt=attempt, subtype=c["subtype"], revised=c["revised"])


def open_console(
    run: str, agent: str, *, host: str = "127.0.0.1", port: int = 0, by: str = "researcher"
) -> AuditConsole:
    """The confirm/revise console over the agent's audit (bound, not yet serving).

    Raises:
        ConfigError: no audit of the agent yet.
    """
    return AuditConsole(AuditFile(run, agent), host=host, port=port, by=by)


_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Failure audit: {agent}</title><style>
body{{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#1d2430}}
table{{border-collapse:collapse}}
td,th{{border:1px solid #d6dbe3;padding:.3em .5em;vertical-align:top}}
th{{background:#eef2f7}}.muted{{color:#69758a}}.ok{{color:#067647}}
</style></head><body><h1>Failure audit of {agent} in {run_id}</h1>
<p class="muted">One primary cause per failed attempt: the earliest persistent divergence.
Confirm the proposal or choose another subtype.</p>
<table id="audit"><tr><th>task</th><th>symptom</th><th>proposal</th><th>cited event</th>
<th>decision</th></tr>{rows}</table></body></html>"""


def _page(doc: Mapping[str, Any], token: str) -> str:
    options = "".join(
        f'<option value="{s.code}">{s.code} {html.escape(STAGES[s.stage])}: '
        f"{html.escape(s.definition[:60])}</option>"
        for s in SUBTYPES
    )
    rows = []
    for item in doc.get("items", []):
        p = item.get("proposal") or {}
        c = item.get("confirmed")
        chosen = (c or {}).get("subtype") or p.get("subtype") or ""
        opts = (
            options.replace(f'value="{chosen}"', f'value="{chosen}" selected')
            if chosen
            else options
        )
        done = (
            f'<p class="ok">confirmed {html.escape(c["subtype"])} by {html.escape(c["by"])}</p>'
            if c
            else ""
        )
        rows.append(
            f'<tr data-task="{html.escape(item["task_id"])}"><td>{html.escape(item["task_id"])} '
            f"#{item['attempt']}</td><td>{html.escape(str(item.get('symptom')))}<br>"
            f'<span class="muted">{html.escape(str(item.get("error") or ""))}</span></td>'
            f'<td>{html.escape(p.get("subtype") or "(none)")}<br><span class="muted">'
            f"{html.escape(p.get('rationale') or '')}</span></td>"
            f"<td>[{html.escape(str(p.get('event', '')))}] "
            f"{html.escape(p.get('event_summary') or '')}</td>"
            f'<td><form method="post" action="/confirm?token={token}">'
            f'<input type="hidden" name="task" value="{html.escape(item["task_id"])}">'
            f'<input type="hidden" name="attempt" value="{item["attempt"]}">'
            f'<select name="subtype">{opts}</select> <input name="note" placeholder="note">'
            f'<button type="submit">Confirm</button></form>{done}</td></tr>'
        )
    return _PAGE.format(
        agent=html.escape(str(doc.get("agent"))),
        run_id=html.escape(str(doc.get("run_id"))),
        rows="".join(rows),
    )


class AuditConsole:
    """The confirm/revise console over HTTP (loopback, token-protected)."""

    def __init__(
        self, audit: AuditFile, *, host: str = "127.0.0.1", port: int = 0, by: str = "researcher"
    ) -> None:
        self.audit = audit
        self.token = secrets.token_urlsafe(24)
        self.by = by
        console = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                logger.debug(format, *args)

            def _authorized(self) -> bool:
                q = parse_qs(urlsplit(self.path).query)
                return secrets.compare_digest((q.get("token") or [""])[0], console.token)

            def _send(
                self, status: int, body: str, ctype: str = "text/html; charset=utf-8"
            ) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.send_header(
                    "Content-Security-Policy",
                    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
                )
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if not self._authorized():
                    self._send(401, "token required")
                    return
                self._send(200, _page(console.audit.doc, console.token))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", errors="replace")
                if not self._authorized() or urlsplit(self.path).path != "/confirm":
                    self._send(401, "token required")
                    return
                form = {k: v[-1] for k, v in parse_qs(body).items()}
                try:
                    console.audit.confirm(
                        form.get("task", ""),
                        int(form.get("attempt", "1")),
                        form.get("subtype", ""),
                        by=console.by,
                        note=form.get("note", ""),
                    )
                except (ConfigError, ValueError) as exc:
                    self._send(400, html.escape(str(exc)))
                    return
                self.send_response(303)
                self.send_header("Location", f"/?token={console.token}")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The console's URL, token included."""
        host, port = self.httpd.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        return f"http://{name}:{port}/?token={self.token}"

    def start(self) -> AuditConsole:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self.httpd.shutdown()
        self.httpd.server_close()


__all__ = [
    "AuditConsole",
    "AuditFile",
    "Decision",
    "confirm_decisions",
    "open_console",
    "parse_decision",
]
