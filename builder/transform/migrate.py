"""Deterministic, transactional migration of a database under a replacement map.

The source file is copied first and never modified. Inside one transaction on the copy:

1. triggers and views are dropped (their definitions are kept and rewritten);
2. **values** are updated cell by cell, exact match only, scoped by (table, column) —
   never a global string replace; CHECK constraints are deferred meanwhile;
3. every table is rebuilt under its rewritten DDL: **columns** renamed, then **tables**
   renamed, with foreign-key references, primary/unique keys, DEFAULT values and CHECK
   constraints (their enumerated literals mapped) rewritten inside the parsed definition;
4. indexes, views and triggers are recreated from their rewritten definitions;
5. the result is checked: names exactly as mapped, row counts unchanged, integrity (CHECK
   constraints included), no new dangling reference, every view runs, no source value left
   where the map translated it.

Any collision, unresolved reference or failed check rolls the transaction back and raises
``MigrationError``. Definitions are rewritten token by token: identifiers and literals match
whole tokens only, so a name or value that is a substring of another is never touched.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.dialect import Token, tokenize
from builder.errors import Rejected
from builder.transform.mapping import ReplacementMap
from builder.transform.schema import Schema, Table, quote_ident, read_schema
from builder.transform.sqlrewrite import rewrite_sql

logger = logging.getLogger(__name__)

_IDENT_KINDS = ("word", "qid", "bt", "br")
_PLURAL = {"index": "indexes", "view": "views", "trigger": "triggers"}
_TABLE_CONSTRAINTS = {"CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN"}


class MigrationError(Rejected):
    """The migration was rolled back; the message says why in one line."""

    stage_name = "transform"


@dataclass(frozen=True, kw_only=True)
class MigrationReport:
    """What the migration did and checked."""

    tables: int
    values_updated: int
    definitions_rewritten: dict[str, int] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "tables": self.tables,
            "values_updated": self.values_updated,
            "definitions_rewritten": dict(self.definitions_rewritten),
            "checks": dict(self.checks),
        }


# ---- token helpers -------------------------------------------------------------------------


def _ident_name(tok: Token) -> str | None:
    if tok.kind == "word":
        return tok.text
    if tok.kind in ("qid", "bt") and len(tok.text) >= 2:
        q = tok.text[0]
        return tok.text[1:-1].replace(q * 2, q)
    if tok.kind == "br" and len(tok.text) >= 2:
        return tok.text[1:-1]
    return None


def _literal_value(tok: Token) -> str | None:
    if tok.kind == "str" and len(tok.text) >= 2 and tok.text.endswith("'"):
        return tok.text[1:-1].replace("''", "'")
    return None


def _lit(value: str) -> Token:
    return Token("str", "'" + value.replace("'", "''") + "'")


def _qid(name: str) -> Token:
    return Token("qid", quote_ident(name))


def _keywords() -> frozenset[str]:
    from sqlglot.tokens import Tokenizer

    return frozenset(k.upper() for k in Tokenizer.KEYWORDS) | {
        "AND",
        "OR",
        "NOT",
        "NULL",
        "IN",
        "IS",
        "LIKE",
        "GLOB",
        "BETWEEN",
        "CASE",
        "WHEN",
        "THEN",
        "ELSE",
        "END",
        "NEW",
        "OLD",
        "BEGIN",
        "FOR",
        "EACH",
        "ROW",
        "BEFORE",
        "AFTER",
        "INSTEAD",
        "OF",
        "ON",
        "UPDATE",
        "INSERT",
        "DELETE",
        "INTO",
        "VALUES",
        "SET",
        "WHERE",
        "SELECT",
        "FROM",
        "TRIGGER",
        "RAISE",
        "ABORT",
        "FAIL",
        "IGNORE",
        "ROLLBACK",
    }


def _split_top(tokens: list[Token]) -> list[list[Token]]:
    """Split a parenthesized body (without its outer parens) at depth-0 commas."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth -= 1
        if tok.text == "," and depth == 0:
            parts.append([])
            continue
        parts[-1].append(tok)
    return parts


def _sig(tokens: Sequence[Token]) -> list[int]:
    return [i for i, t in enumerate(tokens) if t.kind not in ("ws", "comment")]


class _Names:
    """Old -> new names of tables and columns, case-insensitive, plus value maps."""

    def __init__(self, schema: Schema, m: ReplacementMap) -> None:
        self.schema = schema
        self.m = m
        self.keywords = _keywords()

    def table(self, name: str) -> str | None:
        t = self.schema.table(name)
        return self.m.table_target(t.name) if t else None

    def column(self, table: str, name: str) -> str | None:
        t = self.schema.table(table)
        if t is None or t.column(name) is None:
            return None
        return self.m.column_target(t.name, t.column(name).name)  # type: ignore[union-attr]

    def values(self, table: str, column: str) -> Mapping[str, str]:
        return self.m.changed_values(table, column)


# ---- definition rewriters --------------------------------------------------------------------


def _rewrite_expr(
    tokens: list[Token], names: _Names, tables: Sequence[str], *, where: str
) -> list[Token]:
    """Rewrite identifiers and literals of an expression whose columns come from ``tables``.

    ``x.col`` resolves ``x`` as a table name (or NEW/OLD for the first table); a bare
    column resolves against ``tables``; a literal is mapped when the value maps to one
    target in the columns the expression names.
    """
    out = list(tokens)
    sig = _sig(out)
    referenced: list[tuple[str, str]] = []
    for pos, i in enumerate(sig):
        name = _ident_name(out[i])
        if name is None:
            continue
        prev = out[sig[pos - 1]].text if pos > 0 else ""
        nxt = out[sig[pos + 1]].text if pos + 1 < len(sig) else ""
        if nxt == "(" and out[i].kind == "word":
            continue  # a function name
        is_column = any(names.column(t, name) is not None for t in tables)
        if (
            out[i].kind == "word"
            and name.upper() in names.keywords
            and prev != "."
            and not is_column
            and nxt != "."
        ):
            continue
        if nxt == ".":
            owner = tables[0] if name.upper() in ("NEW", "OLD") else name
            if names.table(owner) is not None and name.upper() not in ("NEW", "OLD"):
                out[i] = _qid(names.table(owner))  # type: ignore[arg-type]
            continue
        if prev == ".":
            qual_i = sig[pos - 2] if pos >= 2 else None
            qual = _ident_name(out[qual_i]) if qual_i is not None else None
            if qual is None:
                continue
            owner = (
                tables[0]
                if qual.upper() in ("NEW", "OLD")
                else (_original_table(names, qual) or qual)
            )
            target = names.column(owner, name)
            if target is not None:
                referenced.append((owner, name))
                out[i] = _qid(target)
            continue
        if names.table(name) is not None and name.lower() not in {
            c.lower() for t in tables for c in _cols(names, t)
        }:
            out[i] = _qid(names.table(name))  # type: ignore[arg-type]
            continue
        hits = {names.column(t, name) for t in tables if names.column(t, name) is not None}
        if len(hits) > 1:
            raise MigrationError(f"{where}: column {name!r} is ambiguous in its definition")
        if hits:
            owner = next(t for t in tables if names.column(t, name) is not None)
            referenced.append((owner, name))
            out[i] = _qid(hits.pop())  # type: ignore[arg-type]
    if referenced:
        for i in sig:
            value = _literal_value(out[i])
            if value is None:
                continue
            targets = {names.values(t, c).get(value) for t, c in referenced} - {None}
            if len(targets) > 1:
                raise MigrationError(f"{where}: literal {value!r} maps to several targets")
            if targets:
                out[i] = _lit(targets.pop())  # type: ignore[arg-type]
    return out


def _original_table(names: _Names, name: str) -> str | None:
    t = names.schema.table(name)
    return t.name if t else None


def _cols(names: _Names, table: str) -> list[str]:
    t = names.schema.table(table)
    return list(t.column_names) if t else []


def rewrite_create_table(table: Table, names: _Names) -> str:
    """The CREATE TABLE of ``table`` with names, references, defaults and checks mapped."""
    toks = tokenize(table.sql)
    sig = _sig(toks)
    open_i = next(i for i in sig if toks[i].text == "(")
    close_i = max(i for i in sig if toks[i].text == ")")
    head = toks[:open_i]
    name_i = max(i for i in _sig(head) if _ident_name(head[i]) is not None)
    head[name_i] = _qid(names.m.table_target(table.name))
    body = _split_top(toks[open_i + 1 : close_i])
    new_body: list[list[Token]] = []
    for part in body:
        psig = _sig(part)
        if not psig:
            new_body.append(part)
            continue
        first = part[psig[0]]
        is_constraint = first.kind == "word" and first.text.upper() in _TABLE_CONSTRAINTS
        new_body.append(_rewrite_element(part, table, names, column_def=not is_constraint))
    out = [*head, toks[open_i]]
    for n, part in enumerate(new_body):
        if n:
            out.append(Token("other", ","))
        out.extend(part)
    out.extend(toks[close_i:])
    return "".join(t.text for t in out)


def _rewrite_element(
    part: list[Token], table: Table, names: _Names, *, column_def: bool
) -> list[Token]:
    out = list(part)
    sig = _sig(out)
    column: str | None = None
    start = 0
    if column_def:
        col_name = _ident_name(out[sig[0]])
        col = table.column(col_name) if col_name else None
        column = col.name if col is not None else None
        if column is not None:
            out[sig[0]] = _qid(names.m.column_target(table.name, column))
        start = 1
    where = f"table {table.name}"
    k = start
    while k < len(sig):
        tok = out[sig[k]]
        word = tok.text.upper() if tok.kind == "word" else ""
        if word in ("CHECK", "AS") and k + 1 < len(sig) and out[sig[k + 1]].text == "(":
            end = _matching(out, sig, k + 1)
            inner = out[sig[k + 1] + 1 : sig[end]]
            # Token-for-token substitution: positions in ``sig`` stay valid.
            out[sig[k + 1] + 1 : sig[end]] = _rewrite_expr(inner, names, [table.name], where=where)
            k = end + 1
            continue
        k += 1
    return _continue(out, table, names, column, where)


def _continue(
    out: list[Token], table: Table, names: _Names, column: str | None, where: str
) -> list[Token]:
    """Rewrite key lists, REFERENCES clauses and DEFAULT literals of one element."""
    sig = _sig(out)
    k = 0
    while k < len(sig):
        tok = out[sig[k]]
        word = tok.text.upper() if tok.kind == "word" else ""
        if word in ("KEY", "UNIQUE") and k + 1 < len(sig) and out[sig[k + 1]].text == "(":
            end = _matching(out, sig, k + 1)
            for j in range(k + 2, end):
                name = _ident_name(out[sig[j]])
                if name and table.column(name):
                    out[sig[j]] = _qid(names.m.column_target(table.name, table.column(name).name))  # type: ignore[union-attr]
            k = end + 1
            continue
        if word == "REFERENCES" and k + 1 < len(sig):
            parent = _ident_name(out[sig[k + 1]]) or ""
            ptable = names.schema.table(parent)
            if ptable is None:
                raise MigrationError(f"{where}: references unknown table {parent!r}")
            out[sig[k + 1]] = _qid(names.m.table_target(ptable.name))
            if k + 2 < len(sig) and out[sig[k + 2]].text == "(":
                end = _matching(out, sig, k + 2)
                for j in range(k + 3, end):
                    name = _ident_name(out[sig[j]])
                    pcol = ptable.column(name) if name else None
                    if pcol is not None:
                        out[sig[j]] = _qid(names.m.column_target(ptable.name, pcol.name))
                    elif name:
                        raise MigrationError(
                            f"{where}: references unknown column {ptable.name}.{name}"
                        )
                k = end + 1
                continue
        if word == "DEFAULT" and column is not None and k + 1 < len(sig):
            value = _literal_value(out[sig[k + 1]])
            if value is not None:
                target = names.values(table.name, column).get(value)
                if target is not None:
                    out[sig[k + 1]] = _lit(target)
        k += 1
    return out


def _matching(tokens: list[Token], sig: list[int], k: int) -> int:
    depth = 0
    for j in range(k, len(sig)):
        t = tokens[sig[j]].text
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
            if depth == 0:
                return j
    raise MigrationError("unbalanced parentheses in a definition")


def rewrite_index(sql: str, names: _Names) -> str:
    """``CREATE [UNIQUE] INDEX name ON table (cols) [WHERE expr]`` under the map."""
    toks = tokenize(sql)
    sig = _sig(toks)
    on = next(
        (k for k, i in enumerate(sig) if toks[i].kind == "word" and toks[i].text.upper() == "ON"),
        None,
    )
    if on is None or on + 1 >= len(sig):
        raise MigrationError(f"cannot parse index definition: {sql[:80]}")
    table_name = _ident_name(toks[sig[on + 1]]) or ""
    table = names.schema.table(table_name)
    if table is None:
        raise MigrationError(f"index on unknown table {table_name!r}")
    toks[sig[on + 1]] = _qid(names.m.table_target(table.name))
    rest = toks[sig[on + 1] + 1 :]
    return "".join(t.text for t in toks[: sig[on + 1] + 1]) + "".join(
        t.text for t in _rewrite_expr(rest, names, [table.name], where=f"index on {table.name}")
    )


def rewrite_trigger(sql: str, table: str, names: _Names) -> str:
    """A trigger body under the map (identifiers of every table, NEW/OLD of ``table``)."""
    toks = tokenize(sql)
    sig = _sig(toks)
    # The trigger's own name (third significant token, after CREATE TRIGGER [IF NOT EXISTS])
    # stays; everything after it is rewritten.
    start = 2
    while start < len(sig) and toks[sig[start]].text.upper() in (
        "IF",
        "NOT",
        "EXISTS",
        "TEMP",
        "TEMPORARY",
    ):
        start += 1
    cut = sig[start] + 1 if start < len(sig) else len(toks)
    mentioned = (
        [table]
        + [
            t.name
            for t in names.schema.tables
            if any(
                _ident_name(toks[i]) and _ident_name(toks[i]).lower() == t.name.lower()  # type: ignore[union-attr]
                for i in sig[start + 1 :]
            )
            and t.name != table
        ]
    )
    body = _rewrite_expr(toks[cut:], names, mentioned, where=f"trigger on {table}")
    return "".join(t.text for t in toks[:cut]) + "".join(t.text for t in body)


def rewrite_view(sql: str, names: _Names) -> str:
    """A view definition whose SELECT is rewritten with the SQL rewriter."""
    toks = tokenize(sql)
    sig = _sig(toks)
    depth = 0
    as_i = None
    for k, i in enumerate(sig):
        t = toks[i].text
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
        elif depth == 0 and toks[i].kind == "word" and t.upper() == "AS" and k >= 2:
            as_i = i
            break
    if as_i is None:
        raise MigrationError(f"cannot parse view definition: {sql[:80]}")
    select = "".join(t.text for t in toks[as_i + 1 :])
    res = rewrite_sql(select, names.m, names.schema.columns_by_table())
    if not res.ok:
        raise MigrationError(f"view cannot be rewritten: {'; '.join(res.problems())}")
    return "".join(t.text for t in toks[: as_i + 1]) + " " + res.sql


# ---- the migration -----------------------------------------------------------------------------


def migrate(
    source: Path, dest: Path, mapping: ReplacementMap, *, schema: Schema | None = None
) -> MigrationReport:
    """Copy ``source`` to ``dest`` and apply ``mapping`` in one transaction.

    Raises:
        MigrationError: the migration was rolled back (``dest`` is not left behind).
    """
    schema = schema or read_schema(source)
    names = _Names(schema, mapping)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.tmp")
    src = sqlite3.connect(f"file:{source.resolve()}?mode=ro", uri=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        src.backup(conn)
        src.close()
        report = _apply(conn, schema, names, mapping, source)
        conn.close()
        os.replace(tmp, dest)
        return report
    except MigrationError:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise
    except sqlite3.Error as exc:
        conn.close()
        tmp.unlink(missing_ok=True)
        raise MigrationError(f"migration failed: {exc}") from exc
    finally:
        src.close()


def _apply(
    conn: sqlite3.Connection, schema: Schema, names: _Names, m: ReplacementMap, source: Path
) -> MigrationReport:
    conn.execute("pragma foreign_keys = off")
    conn.execute("pragma legacy_alter_table = on")
    conn.execute("pragma ignore_check_constraints = on")
    counts_before = {
        t.name: conn.execute(f"select count(*) from {quote_ident(t.name)}").fetchone()[0]
        for t in schema.tables
    }
    conn.execute("begin")
    try:
        rewritten: dict[str, int] = {"tables": 0, "indexes": 0, "views": 0, "triggers": 0}
        new_defs: list[tuple[str, str]] = []
        for d in schema.definitions:
            if d.sql is None:
                continue
            if d.kind == "index":
                new_defs.append(("index", rewrite_index(d.sql, names)))
            elif d.kind == "view":
                new_defs.append(("view", rewrite_view(d.sql, names)))
            elif d.kind == "trigger":
                new_defs.append(("trigger", rewrite_trigger(d.sql, d.table, names)))
        for d in schema.definitions:
            if d.kind in ("trigger", "view"):
                conn.execute(f"drop {d.kind} {quote_ident(d.name)}")
        updated = _update_values(conn, schema, m)
        temps: list[tuple[str, str]] = []
        for n, t in enumerate(schema.tables):
            ddl = rewrite_create_table(t, names)
            temp = f"__migrate_{n}_{uuid.uuid4().hex[:6]}"
            ddl_temp = _rename_in_ddl(ddl, temp)
            conn.execute(ddl_temp)
            old_cols = ", ".join(quote_ident(c) for c in t.column_names)
            new_cols = ", ".join(quote_ident(m.column_target(t.name, c)) for c in t.column_names)
            if t.without_rowid:
                conn.execute(
                    f"insert into {quote_ident(temp)} ({new_cols}) "
                    f"select {old_cols} from {quote_ident(t.name)}"
                )
            else:
                conn.execute(
                    f"insert into {quote_ident(temp)} (rowid, {new_cols}) "
                    f"select rowid, {old_cols} from {quote_ident(t.name)}"
                )
            conn.execute(f"drop table {quote_ident(t.name)}")
            temps.append((temp, m.table_target(t.name)))
            rewritten["tables"] += 1
        for temp, target in temps:
            if conn.execute(
                "select 1 from sqlite_master where lower(name) = lower(?)", (target,)
            ).fetchone():
                raise MigrationError(f"table name collision: {target!r} already exists")
            conn.execute(f"alter table {quote_ident(temp)} rename to {quote_ident(target)}")
        for kind, ddl in new_defs:
            conn.execute(ddl)
            rewritten[_PLURAL[kind]] += 1
        if (
            schema.sequences
            and conn.execute(
                "select 1 from sqlite_master where name = 'sqlite_sequence'"
            ).fetchone()
        ):
            conn.execute("delete from sqlite_sequence")
            conn.executemany(
                "insert into sqlite_sequence (name, seq) values (?, ?)",
                [(m.table_target(k), v) for k, v in schema.sequences.items()],
            )
        checks = _verify(conn, schema, m, counts_before, source)
        conn.execute("commit")
    except BaseException:
        conn.execute("rollback")
        raise
    finally:
        conn.execute("pragma ignore_check_constraints = off")
    return MigrationReport(
        tables=len(schema.tables),
        values_updated=updated,
        definitions_rewritten=rewritten,
        checks=checks,
    )


def _rename_in_ddl(ddl: str, name: str) -> str:
    toks = tokenize(ddl)
    sig = _sig(toks)
    open_i = next(i for i in sig if toks[i].text == "(")
    head_sig = [i for i in sig if i < open_i]
    name_i = max(i for i in head_sig if _ident_name(toks[i]) is not None)
    toks[name_i] = _qid(name)
    return "".join(t.text for t in toks)


def _update_values(conn: sqlite3.Connection, schema: Schema, m: ReplacementMap) -> int:
    total = 0
    for t in schema.tables:
        for c in t.columns:
            pairs = m.changed_values(t.name, c.name)
            if not pairs:
                continue
            col, name = quote_ident(c.name), quote_ident(t.name)
            if t.without_rowid:
                for s, tgt in pairs.items():
                    cur = conn.execute(
                        f"update {name} set {col} = ? where typeof({col}) = "
                        f"'text' and {col} = ? collate binary",
                        (tgt, s),
                    )
                    total += cur.rowcount
                continue
            updates = [
                (pairs[v], rid)
                for rid, v in conn.execute(
                    f"select rowid, {col} from {name} where typeof({col}) = 'text'"
                )
                if v in pairs
            ]
            try:
                conn.executemany(f"update {name} set {col} = ? where rowid = ?", updates)
            except sqlite3.IntegrityError as exc:
                raise MigrationError(f"value collision in {t.name}.{c.name}: {exc}") from None
            total += len(updates)
    return total


def _verify(
    conn: sqlite3.Connection,
    schema: Schema,
    m: ReplacementMap,
    counts_before: Mapping[str, int],
    source: Path,
) -> dict[str, Any]:
    got = read_schema(conn)
    want = {
        m.table_target(t.name): [m.column_target(t.name, c) for c in t.column_names]
        for t in schema.tables
    }
    if got.inventory() != want:
        raise MigrationError("tables or columns after migration differ from the map")
    for t in schema.tables:
        n = conn.execute(f"select count(*) from {quote_ident(m.table_target(t.name))}").fetchone()[
            0
        ]
        if n != counts_before[t.name]:
            raise MigrationError(
                f"{t.name}: {n} rows after migration, {counts_before[t.name]} before"
            )
    integrity = [r[0] for r in conn.execute("pragma integrity_check")]
    if integrity != ["ok"]:
        raise MigrationError(f"integrity check failed: {integrity[0]}")
    views = 0
    for d in got.views():
        try:
            conn.execute(f"select * from {quote_ident(d.name)} limit 1").fetchall()
            views += 1
        except sqlite3.Error as exc:
            raise MigrationError(f"view {d.name} does not run after migration: {exc}") from None
    for t in schema.tables:
        for c in t.columns:
            pairs = m.changed_values(t.name, c.name)
            if not pairs:
                continue
            tt, cc = (
                quote_ident(m.table_target(t.name)),
                quote_ident(m.column_target(t.name, c.name)),
            )
            left = {
                v
                for (v,) in conn.execute(
                    f"select distinct {cc} from {tt} where typeof({cc}) = 'text'"
                )
            }
            drift = [s for s, tgt in pairs.items() if s in left and s not in pairs.values()]
            if drift:
                raise MigrationError(
                    f"{t.name}.{c.name}: source value {drift[0]!r} left after migration"
                )
    dangling_new = _dangling(conn, got)
    src = sqlite3.connect(f"file:{source.resolve()}?mode=ro", uri=True)
    try:
        dangling_old = _dangling(src, read_schema(src))
    finally:
        src.close()
    if sum(dangling_new) != sum(dangling_old):
        raise MigrationError(
            f"foreign keys: {sum(dangling_new)} dangling references after "
            f"migration, {sum(dangling_old)} before"
        )
    return {
        "integrity": "ok",
        "views_run": views,
        "dangling_references": sum(dangling_new),
        "inventory": "as mapped",
        "row_counts": "unchanged",
    }


def _dangling(conn: sqlite3.Connection, schema: Schema) -> list[int]:
    out = []
    for fk in schema.foreign_keys:
        if schema.table(fk.parent) is None:
            continue
        notnull = " and ".join(f"c.{quote_ident(x)} is not null" for x in fk.child_columns)
        match = " and ".join(
            f"p.{quote_ident(pc)} = c.{quote_ident(cc)}"
            for cc, pc in zip(fk.child_columns, fk.parent_columns, strict=True)
        )
        out.append(
            conn.execute(
                f"select count(*) from {quote_ident(fk.child)} as c where {notnull} and not exists "
                f"(select 1 from {quote_ident(fk.parent)} as p where {match})"
            ).fetchone()[0]
        )
    return out


__all__ = [
    "MigrationError",
    "MigrationReport",
    "migrate",
    "rewrite_create_table",
    "rewrite_index",
    "rewrite_trigger",
    "rewrite_view",
]
