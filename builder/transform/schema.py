"""What a SQLite database declares: tables, columns, keys, and its other definitions.

Both builder stages read a database through this one view: stage 1 to find text columns,
foreign keys and the definitions a migration must rewrite, stage 2 to walk the relationship
graph and to recreate every table with its own declared types and keys.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from builder.errors import SourceError

logger = logging.getLogger(__name__)


def quote_ident(name: str) -> str:
    """Quote a SQLite identifier.

    >>> print(quote_ident('基金"A'))
    "基金""A"
    """
    return '"' + name.replace('"', '""') + '"'


def affinity(declared: str) -> str:
    """SQLite's type affinity of a declared column type (section 3.1 of its docs).

    >>> [affinity(t) for t in ("VARCHAR(50)", "INT", "DOUBLE PRECISION", "TIMESTAMP(0)", "")]
    ['TEXT', 'INTEGER', 'REAL', 'NUMERIC', 'BLOB']
    """
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(k in t for k in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not t or "BLOB" in t:
        return "BLOB"
    if any(k in t for k in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


@dataclass(frozen=True, kw_only=True)
class Column:
    """One column of a table.

    Attributes:
        name: the column name as declared.
        declared_type: the declared type text (may be empty).
        not_null: declared NOT NULL.
        pk: 1-based position in the primary key, 0 when not part of it.
    """

    name: str
    declared_type: str
    not_null: bool = False
    pk: int = 0

    @property
    def affinity(self) -> str:
        """SQLite type affinity of the declared type."""
        return affinity(self.declared_type)


@dataclass(frozen=True, kw_only=True)
class ForeignKey:
    """A declared (or configured) relationship child(columns) -> parent(columns).

    Composite keys stay together as tuples.
    """

    child: str
    child_columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    declared: bool = True

    def describe(self) -> str:
        """``child(a, b) -> parent(x, y)``."""
        return (
            f"{self.child}({', '.join(self.child_columns)}) -> "
            f"{self.parent}({', '.join(self.parent_columns)})"
        )


@dataclass(frozen=True, kw_only=True)
class Table:
    """One table: its columns, DDL and whether it has a rowid."""

    name: str
    columns: tuple[Column, ...]
    sql: str
    without_rowid: bool = False

    @property
    def column_names(self) -> tuple[str, ...]:
        """Column names in declaration order."""
        return tuple(c.name for c in self.columns)

    @property
    def primary_key(self) -> tuple[str, ...]:
        """Primary-key columns in key order (empty when the table has none)."""
        return tuple(c.name for c in sorted((c for c in self.columns if c.pk), key=lambda c: c.pk))

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (case-insensitive), or None."""
        low = name.lower()
        for c in self.columns:
            if c.name.lower() == low:
                return c
        return None


@dataclass(frozen=True, kw_only=True)
class Definition:
    """A view, index or trigger definition (``sql`` None for automatic indexes)."""

    kind: str
    name: str
    table: str
    sql: str | None


@dataclass(frozen=True, kw_only=True)
class Schema:
    """Everything a database declares, in ``sqlite_master`` order."""

    tables: tuple[Table, ...]
    foreign_keys: tuple[ForeignKey, ...]
    definitions: tuple[Definition, ...] = ()
    sequences: Mapping[str, int] = field(default_factory=dict)

    def table(self, name: str) -> Table | None:
        """The table called ``name`` (case-insensitive), or None."""
        low = name.lower()
        for t in self.tables:
            if t.name.lower() == low:
                return t
        return None

    @property
    def table_names(self) -> tuple[str, ...]:
        """Every table name."""
        return tuple(t.name for t in self.tables)

    def columns_by_table(self) -> dict[str, tuple[str, ...]]:
        """``{table: column names}`` (the shape SQL resolution needs)."""
        return {t.name: t.column_names for t in self.tables}

    def views(self) -> Iterator[Definition]:
        """View definitions."""
        return (d for d in self.definitions if d.kind == "view")

    def inventory(self) -> dict[str, list[str]]:
        """``{table: [column, ...]}`` for comparing two databases' inventories."""
        return {t.name: list(t.column_names) for t in self.tables}


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_schema(db: Path | str | sqlite3.Connection) -> Schema:
    """Read the schema of a SQLite database.

    Args:
        db: a database file or an open connection.

    Raises:
        SourceError: the file is not a readable SQLite database.
    """
    own = not isinstance(db, sqlite3.Connection)
    if own:
        path = Path(db)  # type: ignore[arg-type]
        if not path.is_file():
            raise SourceError(path, "database file is missing")
        conn = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    else:
        conn = db  # type: ignore[assignment]
    try:
        return _read(conn)
    except sqlite3.Error as exc:
        raise SourceError(db if own else "database", f"cannot read schema ({exc})") from exc
    finally:
        if own:
            conn.close()


def _read(conn: sqlite3.Connection) -> Schema:
    rows = conn.execute(
        "select type, name, tbl_name, sql from sqlite_master order by rowid"
    ).fetchall()
    tables: list[Table] = []
    fks: list[ForeignKey] = []
    defs: list[Definition] = []
    for kind, name, tbl, sql in rows:
        if kind == "table":
            if name.startswith("sqlite_"):
                continue
            cols = tuple(
                Column(name=r[1], declared_type=r[2] or "", not_null=bool(r[3]), pk=int(r[5]))
                for r in conn.execute(f"pragma table_info({quote_ident(name)})")
            )
            without_rowid = bool(sql) and "WITHOUT ROWID" in " ".join(sql.upper().split())
            tables.append(
                Table(name=name, columns=cols, sql=sql or "", without_rowid=without_rowid)
            )
        elif kind in ("view", "trigger") or (kind == "index" and sql):
            defs.append(Definition(kind=kind, name=name, table=tbl, sql=sql))
    by_name = {t.name.lower(): t for t in tables}
    for t in tables:
        groups: dict[int, list[tuple[str, str | None, str]]] = {}
        for r in conn.execute(f"pragma foreign_key_list({quote_ident(t.name)})"):
            # id, seq, table, from, to, on_update, on_delete, match
            groups.setdefault(int(r[0]), []).append((r[3], r[4], r[2]))
        for _id, parts in sorted(groups.items()):
            parent = parts[0][2]
            ptable = by_name.get(parent.lower())
            pcols: list[str] = []
            for i, (_frm, to, _p) in enumerate(parts):
                if to is None:
                    # REFERENCES parent without columns: the parent's primary key.
                    pk = ptable.primary_key if ptable else ()
                    pcols.append(pk[i] if i < len(pk) else "rowid")
                else:
                    pcols.append(to)
            fks.append(
                ForeignKey(
                    child=t.name,
                    child_columns=tuple(p[0] for p in parts),
                    parent=ptable.name if ptable else parent,
                    parent_columns=tuple(pcols),
                )
            )
    seqs: dict[str, int] = {}
    if conn.execute("select 1 from sqlite_master where name = 'sqlite_sequence'").fetchone():
        seqs = {str(n): int(s) for n, s in conn.execute("select name, seq from sqlite_sequence")}
    return Schema(
        tables=tuple(tables), foreign_keys=tuple(fks), definitions=tuple(defs), sequences=seqs
    )


__all__ = [
    "Column",
    "Definition",
    "ForeignKey",
    "Schema",
    "Table",
    "affinity",
    "file_sha256",
    "quote_ident",
    "read_schema",
]
