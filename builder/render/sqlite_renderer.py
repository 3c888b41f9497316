"""SQLite renderer: every table routed here goes into one ``.sqlite`` file together.

Tables keep their original DDL (types, primary and foreign keys, constraints) and indexes,
so related tables stay related; the file is built in memory and serialized.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence

from builder.render.base import ReadBack, Rendered, register_renderer
from builder.tables import TableData, TableSchema, quote_ident

logger = logging.getLogger(__name__)

SHARED = ""
"""Key of ``names`` that gives the stem of the shared database file."""


def serialize(conn: sqlite3.Connection) -> bytes:
    """The bytes of an in-memory database, as a rollback-journal file.

    A database copied from a WAL-mode file keeps WAL in its header (bytes 18 and 19); a
    standalone file must not, or opening it needs a writable ``-wal`` beside it.
    """
    data = bytearray(conn.serialize())
    if len(data) >= 20 and data[18] == 2 and data[19] == 2:
        data[18] = data[19] = 1
    return bytes(data)


def deserialize(data: bytes, *, readonly: bool = False) -> sqlite3.Connection:
    """An in-memory connection holding a copy of ``data``."""
    conn = sqlite3.connect(":memory:")
    conn.deserialize(data)
    if readonly:
        conn.execute("pragma query_only = on")
    return conn


class SqliteRenderer:
    """All tables routed to SQLite share one database file."""

    name = "sqlite"

    def compatible(self, table: TableData) -> str | None:
        """SQLite holds every table."""
        return None

    def render(self, tables: Sequence[TableData], *, names: Mapping[str, str]) -> Rendered:
        """Build ``<shared stem>.sqlite`` with the tables' DDL, rows and indexes."""
        conn = sqlite3.connect(":memory:")
        try:
            for table in tables:
                conn.execute(table.schema.ddl)
            for table in tables:
                marks = ", ".join("?" for _ in table.schema.columns)
                conn.executemany(
                    f"insert into {quote_ident(table.name)} values ({marks})", table.rows
                )
                for index in table.schema.indexes:
                    conn.execute(index)
            conn.commit()
            path = f"{names.get(SHARED) or 'database'}.sqlite"
            return Rendered(files={path: serialize(conn)}, locations={t.name: path for t in tables})
        finally:
            conn.close()

    def read_back(self, rendered: Rendered, schemas: Sequence[TableSchema]) -> dict[str, ReadBack]:
        """Open the file and read every table back."""
        out: dict[str, ReadBack] = {}
        opened: dict[str, sqlite3.Connection] = {}
        try:
            for schema in schemas:
                path = rendered.locations[schema.name]
                if path not in opened:
                    opened[path] = deserialize(rendered.files[path], readonly=True)
                conn = opened[path]
                cur = conn.execute(f"select * from {quote_ident(schema.name)}")
                columns = tuple(d[0] for d in cur.description)
                out[schema.name] = ReadBack(columns=columns, rows=cur.fetchall())
        except sqlite3.Error as exc:
            raise ValueError(f"cannot read the database back: {exc}") from exc
        finally:
            for conn in opened.values():
                conn.close()
        return out


SQLITE = register_renderer(SqliteRenderer())

__all__ = ["SHARED", "SqliteRenderer", "deserialize", "serialize"]
