"""The review database: one small SQL layer over SQLite (embedded) and PostgreSQL (by URL).

A database URL is ``sqlite:///path/to/review.db`` (or a bare file path) or
``postgresql://user@host:port/dbname`` (``postgres://`` too; psycopg 3 is imported only
then). SQL is written once with ``?`` placeholders; for PostgreSQL they become ``%s``.

Writes are serialized: a write transaction takes SQLite's RESERVED lock (``BEGIN
IMMEDIATE``) or one PostgreSQL transaction-level advisory lock, so two requests can never
fold the same event history and both append. The event table refuses UPDATE and DELETE
through triggers on both engines: the log is append-only below the application too.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "1"

_COMMON_TABLES = (
    """CREATE TABLE IF NOT EXISTS review_meta (
        key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS review_users (
        name TEXT PRIMARY KEY, role TEXT NOT NULL, salt TEXT NOT NULL,
        password_hash TEXT NOT NULL, created_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS review_sessions (
        token_hash TEXT PRIMARY KEY, user_name TEXT NOT NULL, expires_at TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS review_tasks (
        task_id TEXT PRIMARY KEY, state TEXT NOT NULL, version INTEGER NOT NULL,
        updated_at TEXT NOT NULL)""",
)

_SQLITE_TABLES = (
    """CREATE TABLE IF NOT EXISTS review_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, actor TEXT NOT NULL,
        task_id TEXT, version INTEGER, kind TEXT NOT NULL, payload TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS review_blobs (sha256 TEXT PRIMARY KEY, content BLOB NOT NULL)""",
    """CREATE TRIGGER IF NOT EXISTS review_events_no_update BEFORE UPDATE ON review_events
        BEGIN SELECT RAISE(ABORT, 'the review event log is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS review_events_no_delete BEFORE DELETE ON review_events
        BEGIN SELECT RAISE(ABORT, 'the review event log is append-only'); END""",
)

_POSTGRES_TABLES = (
    """CREATE TABLE IF NOT EXISTS review_events (
        id BIGSERIAL PRIMARY KEY, at TEXT NOT NULL, actor TEXT NOT NULL,
        task_id TEXT, version INTEGER, kind TEXT NOT NULL, payload TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS review_blobs (sha256 TEXT PRIMARY KEY, content BYTEA NOT NULL)""",
    """CREATE OR REPLACE FUNCTION review_events_append_only() RETURNS trigger AS $$
        BEGIN RAISE EXCEPTION 'the review event log is append-only'; END $$ LANGUAGE plpgsql""",
    """DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'review_events_no_change') THEN
          CREATE TRIGGER review_events_no_change BEFORE UPDATE OR DELETE ON review_events
            FOR EACH ROW EXECUTE FUNCTION review_events_append_only();
          CREATE TRIGGER review_events_no_truncate BEFORE TRUNCATE ON review_events
            FOR EACH STATEMENT EXECUTE FUNCTION review_events_append_only();
        END IF; END $$""",
)

_PG_WRITE_LOCK = 0x5E71E0  # one advisory lock serializes every review write transaction

_INDEXES = ("CREATE INDEX IF NOT EXISTS review_events_task ON review_events (task_id, id)",)


class Database:
    """A connection factory for one review database (one connection per thread).

    Args:
        url: ``sqlite:///path``, a file path, or ``postgresql://...``.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.kind, self._target = _parse_url(url)
        self._local = threading.local()
        self._all: list[Any] = []
        self._all_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Database({self.display_url!r})"

    @property
    def display_url(self) -> str:
        """The URL without any password, for messages and logs."""
        if self.kind != "postgresql" or "@" not in self.url:
            return self.url
        scheme, rest = self.url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}@{host}"

    # ---- connections ---------------------------------------------------------------
    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _open(self) -> Any:
        if self.kind == "sqlite":
            Path(self._target).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self._target, isolation_level=None, timeout=30.0, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=30000")
            return conn
        try:
            import psycopg
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError(
                f"{self.display_url}: PostgreSQL needs psycopg; install dataspace[postgres]"
            ) from exc
        try:
            return psycopg.connect(self._target, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise ConfigError(f"{self.display_url}: cannot connect: {exc}".strip()) from exc

    def close(self) -> None:
        """Close every connection this object opened."""
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()
        self._local = threading.local()

    # ---- statements ----------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.kind == "postgresql" else sql

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement (inside the current transaction, if any)."""
        cur = self._conn().cursor()
        try:
            cur.execute(self._sql(sql), tuple(params))
        finally:
            cur.close()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one query and return all its rows."""
        cur = self._conn().cursor()
        try:
            cur.execute(self._sql(sql), tuple(params))
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def insert_event(self, row: Sequence[Any]) -> int:
        """Append one event row ``(at, actor, task_id, version, kind, payload)``; its id."""
        sql = (
            "INSERT INTO review_events (at, actor, task_id, version, kind, payload) "
            "VALUES (?, ?, ?, ?, ?, ?)"
        )
        cur = self._conn().cursor()
        try:
            if self.kind == "postgresql":
                cur.execute(self._sql(sql + " RETURNING id"), tuple(row))
                return int(cur.fetchone()[0])
            cur.execute(sql, tuple(row))
            return int(cur.lastrowid)
        finally:
            cur.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[Database]:
        """A serialized write transaction: committed on success, rolled back on error."""
        conn = self._conn()
        if self.kind == "sqlite":
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return
        with conn.transaction():
            self.query("SELECT pg_advisory_xact_lock(?)", (_PG_WRITE_LOCK,))
            yield self

    def put_blob(self, sha256: str, content: bytes) -> None:
        """Store content under its hash (idempotent)."""
        if self.query("SELECT 1 FROM review_blobs WHERE sha256 = ?", (sha256,)):
            return
        self.execute("INSERT INTO review_blobs (sha256, content) VALUES (?, ?)", (sha256, content))

    def get_blob(self, sha256: str) -> bytes | None:
        """Content stored under a hash, or None."""
        rows = self.query("SELECT content FROM review_blobs WHERE sha256 = ?", (sha256,))
        return bytes(rows[0][0]) if rows else None

    # ---- schema --------------------------------------------------------------------
    def create_schema(self) -> None:
        """Create the tables, indexes and append-only triggers (idempotent)."""
        statements = (
            *_COMMON_TABLES,
            *(_SQLITE_TABLES if self.kind == "sqlite" else _POSTGRES_TABLES),
            *_INDEXES,
        )
        with self.write():
            for stmt in statements:
                self.execute(stmt)
            if not self.query("SELECT 1 FROM review_meta WHERE key = 'schema_version'"):
                self.execute(
                    "INSERT INTO review_meta (key, value) VALUES ('schema_version', ?)",
                    (SCHEMA_VERSION,),
                )

    def meta(self, key: str) -> str | None:
        """A value of the ``review_meta`` table."""
        try:
            rows = self.query("SELECT value FROM review_meta WHERE key = ?", (key,))
        except Exception as exc:
            raise ConfigError(
                f"{self.display_url}: not a review database ({exc}); "
                "create it with `dataspace review init RELEASE --db URL`"
            ) from exc
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        """Set a value of the ``review_meta`` table (inside a write transaction)."""
        self.execute("DELETE FROM review_meta WHERE key = ?", (key,))
        self.execute("INSERT INTO review_meta (key, value) VALUES (?, ?)", (key, value))


def _parse_url(url: str) -> tuple[str, str]:
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql", url
    if url.startswith("sqlite:///"):
        return "sqlite", url[len("sqlite:///") :]
    if url.startswith("sqlite://"):
        raise ConfigError(f"{url}: write sqlite:///relative/path or sqlite:////absolute/path")
    if "://" in url:
        raise ConfigError(f"{url}: unknown database URL; use sqlite:///FILE or postgresql://...")
    return "sqlite", url


__all__ = ["SCHEMA_VERSION", "Database"]
