"""Evidence anchors checked against the content they point into.

An anchor names a place in one workspace file; the server refuses one that points outside
the file, so a record never cites row 9999 of a 36-row table. The forms, per anchor kind:

* ``row``: CSV and JSON tables: data row numbers, ``1`` = the first data row (the header
  is not a row): ``7``, ``2-4``, ``2,5,9``. SQLite: ``table:7`` or ``table:2-4`` (rows in
  the table's natural order).
* ``key``: CSV and JSON: ``column=value`` (a cell of that column holds the value) or a
  bare value held by some cell. SQLite: ``table.column=value``.
* ``section``: Markdown: the text of one of the document's headings.
* ``page``: PDF: a page number within the page count.
* ``timestamp``: video: seconds (``75.5``), ``m:ss`` or ``h:mm:ss``, within the video's
  length.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from typing import Any

from builder.errors import ReviewError
from builder.review.workspace import VersionFiles

logger = logging.getLogger(__name__)

_TOLERANCE_S = 0.5  # a "current time" read near the end of a video still counts
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


def timestamp_seconds(text: str) -> float:
    """``"75.5"``, ``"1:15.5"`` or ``"0:01:15"`` in seconds.

    >>> timestamp_seconds("1:05")
    65.0
    """
    parts = text.strip().split(":")
    if not 1 <= len(parts) <= 3:
        raise ValueError(text)
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + float(part)
    if seconds < 0:
        raise ValueError(text)
    return seconds


def row_numbers(text: str) -> list[int]:
    """The row numbers of a row anchor (``2-4,7`` -> ``[2, 3, 4, 7]``).

    >>> row_numbers("2-4, 7")
    [2, 3, 4, 7]
    """
    out: list[int] = []
    for part in text.split(","):
        m = _RANGE.match(part)
        if not m:
            raise ValueError(part)
        lo = int(m.group(1))
        hi = int(m.group(2) or lo)
        if hi < lo:
            raise ValueError(part)
        out.extend(range(lo, min(hi, lo + 100_000) + 1))
    return out


def _norm(text: str) -> str:
    return " ".join(text.replace("#", " ").split()).casefold()


def markdown_headings(files: VersionFiles, rel: str) -> list[str]:
    """The heading texts of a Markdown file, in document order."""
    from markdown_it import MarkdownIt

    text = files.read(rel).decode("utf-8", errors="replace")
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return [
        tokens[i + 1].content.strip()
        for i, t in enumerate(tokens)
        if t.type == "heading_open" and i + 1 < len(tokens)
    ]


def check_anchor(files: VersionFiles, rel: str, modality: str, kind: str, anchor: str) -> None:
    """Refuse an anchor that does not point into the file's content.

    Raises:
        ReviewError: the anchor is malformed, or points past the content (the message says
            what the file holds, e.g. ``row must be 1..36``).
    """
    if kind == "page":
        if modality != "pdf":
            raise ReviewError("page anchors point into PDFs")
        pages = files.pdf_pages(rel)
        if not anchor.isdigit() or not 1 <= int(anchor) <= pages:
            raise ReviewError(f"page must be 1..{pages} ({rel} has {pages} pages)")
    elif kind == "timestamp":
        if modality != "video":
            raise ReviewError("timestamp anchors point into videos")
        try:
            at = timestamp_seconds(anchor)
        except ValueError:
            raise ReviewError("a time such as 12.5 or 1:05") from None
        length = files.video_duration(rel)
        if length is not None and at > length + _TOLERANCE_S:
            raise ReviewError(
                f"{anchor} is past the end of {rel}, which is {length:.1f} seconds long"
            )
    elif kind == "section":
        if modality != "markdown":
            raise ReviewError("section anchors point into Markdown documents (use page for PDFs)")
        heads = markdown_headings(files, rel)
        if _norm(anchor) not in {_norm(h) for h in heads}:
            shown = "; ".join(heads[:12]) or "none"
            raise ReviewError(f"no heading {anchor!r} in {rel} (its headings: {shown})")
    elif kind in ("row", "key"):
        if modality in ("csv", "json"):
            _check_table(files.table(rel, limit=10**9), rel, kind, anchor)
        elif modality == "sqlite":
            _check_sqlite(files, rel, kind, anchor)
        else:
            raise ReviewError(f"{kind} anchors point into tables (CSV, JSON or SQLite)")


def _check_table(tab: dict[str, Any], rel: str, kind: str, anchor: str) -> None:
    total = int(tab["total"])
    if kind == "row":
        try:
            rows = row_numbers(anchor)
        except ValueError:
            raise ReviewError(
                "a data row number such as 7, 2-4 or 2,5 (1 = the first data row)"
            ) from None
        bad = [r for r in rows if not 1 <= r <= total]
        if bad:
            raise ReviewError(
                f"row must be 1..{total} ({rel} has {total} data rows; 1 = the first data "
                f"row), not {bad[0]}"
            )
        return
    header = [str(h) for h in tab["header"]]
    column, sep, value = anchor.partition("=")
    if sep:
        col = column.strip()
        if col not in header:
            raise ReviewError(f"no column {col!r} in {rel} (its columns: {', '.join(header)})")
        j = header.index(col)
        cells = (str(r[j]) for r in tab["rows"] if j < len(r))
    else:
        value = anchor
        cells = (str(c) for r in tab["rows"] for c in r)
    if value.strip() not in {c.strip() for c in cells}:
        raise ReviewError(f"no cell of {rel} holds {value.strip()!r}")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sqlite_conn(files: VersionFiles, rel: str) -> sqlite3.Connection:
    local = files.local_path(rel).resolve()
    return sqlite3.connect(f"file:{local}?mode=ro&immutable=1", uri=True)


def _check_sqlite(files: VersionFiles, rel: str, kind: str, anchor: str) -> None:
    conn = _sqlite_conn(files, rel)
    try:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY name"
            )
        ]
        if kind == "row":
            table, sep, rows_text = anchor.partition(":")
            if not sep:
                raise ReviewError("a SQLite row anchor is table:N or table:N-M")
            table = table.strip()
            if table not in tables:
                raise ReviewError(f"no table {table!r} in {rel} (its tables: {', '.join(tables)})")
            total = int(conn.execute(f"SELECT COUNT(*) FROM {_q(table)}").fetchone()[0])
            try:
                rows = row_numbers(rows_text)
            except ValueError:
                raise ReviewError("a SQLite row anchor is table:N or table:N-M") from None
            bad = [r for r in rows if not 1 <= r <= total]
            if bad:
                raise ReviewError(f"row must be 1..{total} (table {table} of {rel})")
            return
        left, sep, value = anchor.partition("=")
        table, dot, column = left.strip().partition(".")
        if not sep or not dot:
            raise ReviewError("a SQLite key anchor is table.column=value")
        if table not in tables:
            raise ReviewError(f"no table {table!r} in {rel} (its tables: {', '.join(tables)})")
        cols = [str(r[1]) for r in conn.execute(f"PRAGMA table_info({_q(table)})")]
        if column not in cols:
            raise ReviewError(f"no column {column!r} in table {table} (columns: {', '.join(cols)})")
        hit = conn.execute(
            f"SELECT 1 FROM {_q(table)} WHERE CAST({_q(column)} AS TEXT) = ? LIMIT 1",
            (value.strip(),),
        ).fetchone()
        if hit is None:
            raise ReviewError(f"no row of {table} has {column} = {value.strip()!r}")
    except sqlite3.Error as exc:
        raise ReviewError(f"{rel}: cannot read the database ({exc})") from exc
    finally:
        conn.close()


__all__ = ["check_anchor", "markdown_headings", "row_numbers", "timestamp_seconds"]
