"""A task version's workspace: read-only base files under versioned overlays, and viewers.

The base workspace is ``input/task_N/context`` of the loaded release and is never written.
A repair stores changed files as blobs in the database; a version's overlay maps each
changed path to its blob (or to None for a deleted file), cumulatively over the versions.

Every path from a request goes through :func:`clean_path` (relative, no ``..``, no empty
or ``.`` parts, no backslash or NUL) and, for base files, through :meth:`VersionFiles.open`,
which refuses symlinks anywhere on the path and anything that resolves outside the base.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.errors import ReviewError
from builder.review.taxonomy import modality_of

logger = logging.getLogger(__name__)

MAX_TABLE_ROWS = 500
MAX_QUERY_ROWS = 1000
QUERY_STEPS = 5_000_000  # sqlite VM steps (x1000) before a viewer query is interrupted


def clean_path(path: object) -> str:
    """Validate a workspace-relative path from a request; return it normalized.

    >>> clean_path("tables/a.csv")
    'tables/a.csv'
    >>> clean_path("../ledger/task_1/ledger.json")
    Traceback (most recent call last):
    ...
    builder.errors.ReviewError: '../ledger/task_1/ledger.json': workspace paths are relative ...
    """
    if not isinstance(path, str) or not path:
        raise ReviewError("a workspace path is required")
    parts = path.split("/")
    if (
        path.startswith("/")
        or "\\" in path
        or "\0" in path
        or (len(path) > 1 and path[1] == ":")
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise ReviewError(
            f"{path!r}: workspace paths are relative to the task's workspace, without '..', "
            "'.', empty parts or backslashes"
        )
    return path


@dataclass(frozen=True, kw_only=True)
class FileEntry:
    """One workspace file as listed to a reviewer."""

    path: str
    modality: str
    size: int
    overlay: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "path": self.path,
            "modality": self.modality,
            "size": self.size,
            "overlay": self.overlay,
        }


class VersionFiles:
    """The files of one task version.

    Args:
        base: the read-only base workspace folder.
        overlay: path -> blob sha256 (None: deleted in this version).
        blob: loads a blob's bytes by its hash.
        cache_dir: where overlay blobs are materialized for viewers that need a file.
    """

    def __init__(
        self,
        base: Path,
        overlay: Mapping[str, str | None],
        blob: Callable[[str], bytes | None],
        cache_dir: Path,
    ) -> None:
        self.base = base
        self.overlay = dict(overlay)
        self._blob = blob
        self._cache = cache_dir

    # ---- listing and reading ---------------------------------------------------------
    def list(self) -> list[FileEntry]:
        """Every file of the version, sorted by path (symlinks in the base are skipped)."""
        entries: dict[str, FileEntry] = {}
        base = str(self.base)
        for dirpath, dirs, files in os.walk(base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(dirpath, d)))
            for name in files:
                full = os.path.join(dirpath, name)
                st = os.lstat(full)
                if not stat.S_ISREG(st.st_mode):
                    continue
                rel = os.path.relpath(full, base).replace(os.sep, "/")
                entries[rel] = FileEntry(
                    path=rel, modality=modality_of(rel), size=st.st_size, overlay=False
                )
        for rel, sha in self.overlay.items():
            if sha is None:
                entries.pop(rel, None)
                continue
            content = self._blob(sha)
            entries[rel] = FileEntry(
                path=rel,
                modality=modality_of(rel),
                size=len(content or b""),
                overlay=True,
            )
        return [entries[k] for k in sorted(entries)]

    def exists(self, path: str) -> bool:
        """Whether the (clean) path is a file of this version."""
        try:
            self.local_path(path)
        except ReviewError:
            return False
        return True

    def read(self, path: str) -> bytes:
        """The bytes of one file."""
        return self.local_path(path).read_bytes()

    def local_path(self, path: str) -> Path:
        """A local file holding the version's content of ``path``.

        Raises:
            ReviewError: (404) no such file in this version, or the path escapes.
        """
        rel = clean_path(path)
        if rel in self.overlay:
            sha = self.overlay[rel]
            if sha is None:
                raise ReviewError(f"{rel}: not in this task version", status=404)
            return self._materialize(rel, sha)
        return self._base_file(rel)

    def _base_file(self, rel: str) -> Path:
        current = self.base
        for part in rel.split("/"):
            current = current / part
            try:
                st = os.lstat(current)
            except OSError:
                raise ReviewError(f"{rel}: not in this task version", status=404) from None
            if stat.S_ISLNK(st.st_mode):
                raise ReviewError(f"{rel}: symbolic links are not served", status=404)
        if not stat.S_ISREG(st.st_mode):
            raise ReviewError(f"{rel}: not a file", status=404)
        real = os.path.realpath(current)
        if os.path.commonpath([real, os.path.realpath(self.base)]) != os.path.realpath(self.base):
            raise ReviewError(f"{rel}: outside the workspace", status=404)
        return current

    def _materialize(self, rel: str, sha: str) -> Path:
        suffix = Path(rel).suffix
        dest = self._cache / f"{sha}{suffix}"
        if not dest.is_file():
            content = self._blob(sha)
            if content is None:
                raise ReviewError(f"{rel}: overlay content {sha[:12]} is missing", status=500)
            self._cache.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._cache)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content)
            os.chmod(tmp, 0o444)
            os.replace(tmp, dest)
        return dest

    def contents(self) -> dict[str, bytes | Path]:
        """Every file of the version, for export: path -> local file."""
        return {e.path: self.local_path(e.path) for e in self.list()}

    # ---- viewers -------------------------------------------------------------------
    def table(self, path: str, *, limit: int = MAX_TABLE_ROWS) -> dict[str, Any]:
        """A CSV or record-oriented JSON file as ``{header, rows, total}`` (first rows)."""
        rel = clean_path(path)
        kind = modality_of(rel)
        raw = self.read(rel)
        if kind == "csv":
            rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig", errors="replace"))))
            header, body = (rows[0], rows[1:]) if rows else ([], [])
        elif kind == "json":
            try:
                obj = json.loads(raw.decode("utf-8-sig"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ReviewError(f"{rel}: not valid JSON ({exc})") from exc
            header, body = _json_table(obj)
        else:
            raise ReviewError(f"{rel}: the table viewer reads CSV and JSON, not {kind}")
        return {"header": header, "rows": body[:limit], "total": len(body)}

    def markdown(self, path: str) -> str:
        """A Markdown file rendered to HTML (raw HTML in the source is escaped)."""
        from markdown_it import MarkdownIt

        rel = clean_path(path)
        if modality_of(rel) != "markdown":
            raise ReviewError(f"{rel}: not a Markdown file")
        text = self.read(rel).decode("utf-8", errors="replace")
        return str(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))

    def pdf_pages(self, path: str) -> int:
        """How many pages a PDF has."""
        import pymupdf

        rel = clean_path(path)
        if modality_of(rel) != "pdf":
            raise ReviewError(f"{rel}: not a PDF")
        with pymupdf.open(self.local_path(rel)) as doc:
            return int(doc.page_count)

    def pdf_page_png(self, path: str, page: int, *, zoom: float = 1.5) -> bytes:
        """One PDF page (1-based) rendered to PNG on the server."""
        import pymupdf

        rel = clean_path(path)
        if modality_of(rel) != "pdf":
            raise ReviewError(f"{rel}: not a PDF")
        with pymupdf.open(self.local_path(rel)) as doc:
            if not 1 <= page <= doc.page_count:
                raise ReviewError(f"{rel}: page {page} is not in 1..{doc.page_count}")
            pix = doc[page - 1].get_pixmap(matrix=pymupdf.Matrix(zoom, zoom))
            return bytes(pix.tobytes("png"))

    def sqlite_query(self, path: str, sql: str, *, limit: int = MAX_QUERY_ROWS) -> dict[str, Any]:
        """Run one read-only query on a SQLite artifact.

        The file is opened read-only and immutable, an authorizer allows reading only (no
        ATTACH, PRAGMA writes, or any change), and a progress handler stops long queries.
        """
        rel = clean_path(path)
        if modality_of(rel) != "sqlite":
            raise ReviewError(f"{rel}: not a SQLite database")
        if not isinstance(sql, str) or not sql.strip():
            raise ReviewError("an SQL query is required")
        local = self.local_path(rel).resolve()
        conn = sqlite3.connect(f"file:{local}?mode=ro&immutable=1", uri=True)
        try:
            conn.set_authorizer(_read_only_authorizer)
            steps = [0]

            def _progress() -> int:
                steps[0] += 1
                return 1 if steps[0] > QUERY_STEPS // 1000 else 0

            conn.set_progress_handler(_progress, 1000)
            try:
                cur = conn.execute(sql)
                header = [d[0] for d in cur.description or ()]
                rows = cur.fetchmany(limit + 1)
            except sqlite3.Error as exc:
                raise ReviewError(f"{rel}: query refused or failed: {exc}") from exc
        finally:
            conn.close()
        return {
            "header": header,
            "rows": [[_cell(v) for v in r] for r in rows[:limit]],
            "truncated": len(rows) > limit,
        }

    def video_duration(self, path: str) -> float | None:
        """The duration of a video in seconds (None when it cannot be probed)."""
        try:
            import imageio_ffmpeg

            reader = imageio_ffmpeg.read_frames(str(self.local_path(path)))
            meta = next(reader)
            reader.close()
            return float(meta.get("duration") or 0.0) or None
        except Exception:  # a viewer aid only: an unreadable file is reported elsewhere
            logger.debug("cannot probe %s", path, exc_info=True)
            return None


def sha256(content: bytes) -> str:
    """The hex SHA-256 of bytes."""
    return hashlib.sha256(content).hexdigest()


def _cell(value: object) -> object:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value


_READ_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    getattr(sqlite3, "SQLITE_RECURSIVE", 33),
}


def _read_only_authorizer(action: int, *_args: object) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


def _json_table(obj: Any) -> tuple[list[str], list[list[Any]]]:
    records = obj
    if isinstance(obj, dict):
        lists = [v for v in obj.values() if isinstance(v, list)]
        records = lists[0] if len(lists) == 1 else [obj]
    if not isinstance(records, list):
        return ["value"], [[json.dumps(records, ensure_ascii=False)]]
    header: list[str] = []
    for rec in records:
        if isinstance(rec, dict):
            header.extend(k for k in rec if k not in header)
    if not header:
        return ["value"], [[json.dumps(r, ensure_ascii=False)] for r in records]
    rows = [[rec.get(k) if isinstance(rec, dict) else None for k in header] for rec in records]
    return header, rows


__all__ = ["FileEntry", "VersionFiles", "clean_path", "sha256"]
