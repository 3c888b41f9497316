"""Tables of a task database in memory, and the typed comparison round trips rely on.

A ``TableData`` holds one table's schema (name, columns, declared types, DDL, indexes) and
its rows as Python values exactly as SQLite returns them (``int``, ``float``, ``str``,
``bytes``, ``None``). ``compare_rows`` checks a rendering read back against it: columns,
row count, null positions, typed values and duplicate multiplicity.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

logger = logging.getLogger(__name__)

Row = tuple[Any, ...]


@dataclass(frozen=True, kw_only=True)
class TableSchema:
    """A table's name, columns, declared column types, DDL and index DDL."""

    name: str
    columns: tuple[str, ...]
    declared_types: tuple[str, ...]
    ddl: str
    indexes: tuple[str, ...] = ()

    @property
    def affinities(self) -> tuple[str, ...]:
        """SQLite's type affinity of each column."""
        return tuple(affinity(t) for t in self.declared_types)


@dataclass(frozen=True, kw_only=True)
class TableData:
    """A table's schema and all its rows."""

    schema: TableSchema
    rows: list[Row]

    @property
    def name(self) -> str:
        """The table name."""
        return self.schema.name

    @property
    def row_count(self) -> int:
        """Number of rows."""
        return len(self.rows)

    @cached_property
    def has_blob(self) -> bool:
        """Whether any cell holds binary data."""
        return any(isinstance(v, bytes) for row in self.rows for v in row)


def affinity(declared: str) -> str:
    """SQLite's column affinity for a declared type (rules of section 3.1 of its docs).

    >>> [affinity(t) for t in ("INT", "VARCHAR(10)", "", "DOUBLE PRECISION", "DECIMAL(9,2)")]
    ['INTEGER', 'TEXT', 'BLOB', 'REAL', 'NUMERIC']
    """
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "TEXT"
    if "BLOB" in t or not t.strip():
        return "BLOB"
    if "REAL" in t or "FLOA" in t or "DOUB" in t:
        return "REAL"
    return "NUMERIC"


def quote_ident(name: str) -> str:
    """Quote an SQL identifier.

    >>> quote_ident('a"b')
    '"a""b"'
    """
    return '"' + name.replace('"', '""') + '"'


def table_names(conn: sqlite3.Connection) -> list[str]:
    """Ordinary tables of a database (no internal ``sqlite_`` or virtual tables), by name."""
    rows = conn.execute(
        "select name, sql from sqlite_master where type = 'table' and name not like 'sqlite_%' "
        "order by name"
    ).fetchall()
    return [name for name, sql in rows if not re.match(r"\s*create\s+virtual", sql or "", re.I)]


def read_schema(conn: sqlite3.Connection, name: str) -> TableSchema:
    """The schema of one table."""
    info = conn.execute(f"pragma table_info({quote_ident(name)})").fetchall()
    ddl = conn.execute(
        "select sql from sqlite_master where type = 'table' and name = ?", (name,)
    ).fetchone()[0]
    indexes = tuple(
        r[0]
        for r in conn.execute(
            "select sql from sqlite_master where type = 'index' and tbl_name = ? "
            "and sql is not null order by name",
            (name,),
        )
    )
    return TableSchema(
        name=name,
        columns=tuple(r[1] for r in info),
        declared_types=tuple(r[2] or "" for r in info),
        ddl=ddl,
        indexes=indexes,
    )


def read_table(conn: sqlite3.Connection, name: str) -> TableData:
    """One table with all its rows, in storage order."""
    schema = read_schema(conn, name)
    rows = conn.execute(f"select * from {quote_ident(name)}").fetchall()
    return TableData(schema=schema, rows=rows)


def read_tables(conn: sqlite3.Connection) -> list[TableData]:
    """Every ordinary table of a database."""
    return [read_table(conn, name) for name in table_names(conn)]


def _key(row: Sequence[Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((type(v).__name__, v) for v in row)


def _describe(value: Any) -> str:
    return "NULL" if value is None else f"{type(value).__name__} {value!r}"[:80]


def compare_rows(expected: TableData, columns: Sequence[str], rows: Sequence[Row]) -> str | None:
    """Why a table read back differs from the original, or None when it is the same.

    Values must match in type and value (``3`` is not ``3.0`` or ``"3"``), nulls must stay
    at their positions and duplicate rows keep their multiplicity; row order is free.

    >>> t = TableData(schema=TableSchema(name="t", columns=("a",), declared_types=("INT",),
    ...     ddl=""), rows=[(1,), (None,)])
    >>> compare_rows(t, ["a"], [(None,), (1,)]) is None
    True
    >>> compare_rows(t, ["a"], [("1",), (None,)])
    "row 1 column 'a': expected int 1, got str '1'"
    """
    if tuple(columns) != expected.schema.columns:
        return f"columns differ: expected {list(expected.schema.columns)}, got {list(columns)}"
    if len(rows) != len(expected.rows):
        return f"row count differs: expected {len(expected.rows)}, got {len(rows)}"
    # Fast path: repr tells 1, 1.0, "1" and None apart, and a float's repr is exact.
    if repr(list(rows)) == repr(expected.rows):
        return None
    if Counter(map(_key, rows)) == Counter(map(_key, expected.rows)):
        return None
    for n, (want, got) in enumerate(zip(expected.rows, rows, strict=True), start=1):
        if len(got) != len(want):
            return f"row {n}: expected {len(want)} cells, got {len(got)}"
        for col, a, b in zip(expected.schema.columns, want, got, strict=True):
            if type(a) is not type(b) or a != b:
                return f"row {n} column {col!r}: expected {_describe(a)}, got {_describe(b)}"
    return "rows differ as a multiset (duplicates or order-independent content)"


__all__ = [
    "Row",
    "TableData",
    "TableSchema",
    "affinity",
    "compare_rows",
    "quote_ident",
    "read_schema",
    "read_table",
    "read_tables",
    "table_names",
]
