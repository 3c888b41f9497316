"""Write the selected rows as a fresh SQLite database, then check its structure.

The new database recreates every table from its own DDL (declared types, keys,
constraints), inserts the selected rows in source order with their rowids, and rebuilds
indexes, views and triggers from their definitions. ``structural_problems`` then checks:
the table and column inventory, primary-key uniqueness, foreign-key consistency, per-table
row counts against the selection, the protected rows, the protected predicates and the
query-path matches.

Foreign-key consistency is checked with joins rather than ``PRAGMA foreign_key_check``,
which refuses schemas whose parent columns are not unique (EHRSQL's ICUSTAYS). A reference
that already dangles in the source database cannot be repaired without inventing a row: it
is counted (``inherited``); a reference that dangles only in the sample is an error.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.sampling.safeguards import Safeguards, predicate_sql
from builder.transform.schema import ForeignKey, Schema, file_sha256, quote_ident, read_schema

logger = logging.getLogger(__name__)


def materialize(source: Path, schema: Schema, rows: Mapping[str, set[int]], dest: Path) -> Path:
    """Write a new database at ``dest`` holding ``rows`` of every table of ``source``.

    WITHOUT ROWID tables are copied whole. The file appears atomically.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.tmp")
    conn = sqlite3.connect(_uri(tmp), uri=True)
    try:
        conn.execute("pragma foreign_keys = off")
        conn.execute("attach database ? as src", (_uri(source, ro=True),))
        conn.execute("begin")
        for t in schema.tables:
            conn.execute(t.sql)
        for t in schema.tables:
            cols = ", ".join(quote_ident(c) for c in t.column_names)
            name = quote_ident(t.name)
            if t.without_rowid:
                conn.execute(f"insert into main.{name} ({cols}) select {cols} from src.{name}")
                continue
            keep = sorted(rows.get(t.name, ()))
            if not keep:
                continue
            conn.execute("create temp table if not exists _keep (k integer primary key)")
            conn.execute("delete from temp._keep")
            conn.executemany("insert into temp._keep (k) values (?)", ((k,) for k in keep))
            conn.execute(
                f"insert into main.{name} (rowid, {cols}) select rowid, {cols} from src.{name} "
                "where rowid in (select k from temp._keep) order by rowid"
            )
        for d in schema.definitions:
            if d.kind == "index" and d.sql:
                conn.execute(d.sql)
        for d in schema.definitions:
            if d.kind == "view" and d.sql:
                conn.execute(d.sql)
        for d in schema.definitions:
            if d.kind == "trigger" and d.sql:
                conn.execute(d.sql)
        if (
            schema.sequences
            and conn.execute(
                "select 1 from main.sqlite_master where name = 'sqlite_sequence'"
            ).fetchone()
        ):
            conn.execute("delete from main.sqlite_sequence")
            conn.executemany(
                "insert into main.sqlite_sequence (name, seq) values (?, ?)",
                list(schema.sequences.items()),
            )
        conn.execute("drop table if exists temp._keep")
        conn.commit()
        conn.execute("detach database src")
    except BaseException:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise
    conn.close()
    os.replace(tmp, dest)
    return dest


def _uri(path: Path, *, ro: bool = False) -> str:
    from urllib.parse import quote

    return f"file:{quote(str(path.resolve()))}" + ("?mode=ro" if ro else "")


@dataclass(frozen=True, kw_only=True)
class ForeignKeyReport:
    """Foreign-key consistency of a sampled database against its source.

    Attributes:
        new_dangling: per relationship, child rows whose parent exists in the source but not
            in the sample (must be empty).
        inherited: per relationship, child rows whose parent is missing in the source too.
        sqlite_check: what ``PRAGMA foreign_key_check`` says (or why it cannot run).
    """

    new_dangling: Mapping[str, int] = field(default_factory=dict)
    inherited: Mapping[str, int] = field(default_factory=dict)
    sqlite_check: str = ""

    @property
    def ok(self) -> bool:
        """No reference dangles that did not dangle in the source."""
        return not any(self.new_dangling.values())

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "ok": self.ok,
            "new_dangling": dict(self.new_dangling),
            "inherited": dict(self.inherited),
            "sqlite_check": self.sqlite_check,
        }


def foreign_key_report(sample: Path, source: Path, fks: Iterable[ForeignKey]) -> ForeignKeyReport:
    """Check every relationship of ``fks`` in ``sample`` against ``source``."""
    conn = sqlite3.connect(_uri(sample, ro=True), uri=True)
    try:
        conn.execute("attach database ? as src", (_uri(source, ro=True),))
        new: dict[str, int] = {}
        inherited: dict[str, int] = {}
        for fk in fks:
            child, parent = quote_ident(fk.child), quote_ident(fk.parent)
            notnull = " and ".join(f"c.{quote_ident(c)} is not null" for c in fk.child_columns)
            match = " and ".join(
                f"p.{quote_ident(pc)} = c.{quote_ident(cc)}"
                for cc, pc in zip(fk.child_columns, fk.parent_columns, strict=True)
            )
            base = (
                f"from main.{child} as c where {notnull} and not exists "
                f"(select 1 from main.{parent} as p where {match})"
            )
            n_missing = conn.execute(f"select count(*) {base}").fetchone()[0]
            if not n_missing:
                continue
            n_new = conn.execute(
                f"select count(*) {base} and exists (select 1 from src.{parent} as p where {match})"
            ).fetchone()[0]
            if n_new:
                new[fk.describe()] = n_new
            if n_missing - n_new:
                inherited[fk.describe()] = n_missing - n_new
        try:
            n = len(conn.execute("pragma main.foreign_key_check").fetchall())
            sqlite_check = "ok" if n == 0 else f"{n} rows reported"
        except sqlite3.Error as exc:
            sqlite_check = f"not available: {exc}"
        return ForeignKeyReport(new_dangling=new, inherited=inherited, sqlite_check=sqlite_check)
    finally:
        conn.close()


def structural_problems(
    sample: Path,
    source_schema: Schema,
    rows: Mapping[str, set[int]],
    protected: Mapping[str, set[int]],
    guards: Safeguards,
    source_index: Any,
) -> list[str]:
    """Every structural problem of a sampled database (empty when it is sound).

    Args:
        sample: the sampled database.
        source_schema: the schema it must reproduce.
        rows: the selected rowids per table.
        protected: the protected rowids per table.
        guards: the query safeguards (predicates and relationships must keep a match).
        source_index: the ``SourceIndex`` of the database sampled from.
    """
    problems: list[str] = []
    got = read_schema(sample)
    if got.inventory() != source_schema.inventory():
        problems.append("table or column inventory differs from the source")
    want_types = {
        (t.name, c.name): (c.declared_type, c.pk) for t in source_schema.tables for c in t.columns
    }
    have_types = {(t.name, c.name): (c.declared_type, c.pk) for t in got.tables for c in t.columns}
    if want_types != have_types:
        problems.append("declared column types or keys differ from the source")
    if len(list(got.definitions)) != len(list(source_schema.definitions)):
        problems.append("indexes, views or triggers differ from the source")
    conn = sqlite3.connect(_uri(sample, ro=True), uri=True)
    try:
        for t in source_schema.tables:
            name = quote_ident(t.name)
            n = conn.execute(f"select count(*) from {name}").fetchone()[0]
            if not t.without_rowid and n != len(rows.get(t.name, ())):
                problems.append(f"{t.name}: {n} rows written, {len(rows.get(t.name, ()))} selected")
            pk = t.primary_key
            if pk:
                cols = ", ".join(quote_ident(c) for c in pk)
                dup = conn.execute(
                    f"select count(*) from (select {cols} from {name} "
                    f"group by {cols} having count(*) > 1)"
                ).fetchone()[0]
                if dup:
                    problems.append(f"{t.name}: {dup} duplicated primary keys")
            keep = protected.get(t.name, set())
            if keep and not t.without_rowid:
                present = _count_present(conn, name, keep)
                if present != len(keep):
                    problems.append(f"{t.name}: {len(keep) - present} protected rows missing")
        for p in guards.predicates:
            if p.kind not in ("equality", "membership", "range", "pattern"):
                continue
            where, params = predicate_sql(p)
            q = f"select 1 from {quote_ident(p.table)} where {where} limit 1"
            if (
                source_index.conn.execute(q, params).fetchone()
                and not conn.execute(q, params).fetchone()
            ):
                problems.append(
                    f"protected predicate lost: {p.table}.{p.column} {p.op} {list(p.values)}"
                )
        for rel in guards.relationships:
            match = " and ".join(
                f"l.{quote_ident(a)} = r.{quote_ident(b)}"
                for a, b in zip(rel.left_columns, rel.right_columns, strict=True)
            )
            q = (
                f"select 1 from {quote_ident(rel.left)} as l join {quote_ident(rel.right)} "
                f"as r on {match} limit 1"
            )
            if source_index.conn.execute(q).fetchone() and not conn.execute(q).fetchone():
                problems.append(f"protected join lost all matches: {rel.describe()}")
    finally:
        conn.close()
    return problems


def _count_present(conn: sqlite3.Connection, name: str, keys: set[int]) -> int:
    total = 0
    keys_list = sorted(keys)
    for i in range(0, len(keys_list), 500):
        chunk = keys_list[i : i + 500]
        marks = ", ".join("?" for _ in chunk)
        total += conn.execute(
            f"select count(*) from {name} where rowid in ({marks})", chunk
        ).fetchone()[0]
    return total


__all__ = [
    "ForeignKeyReport",
    "file_sha256",
    "foreign_key_report",
    "materialize",
    "structural_problems",
]
