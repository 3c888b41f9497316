"""Query safeguards C_query, read from the resolved SQL AST one query block at a time.

- **Predicate bindings**: a base column with a literal, a literal set, a range or a pattern
  (equality, membership, range, pattern, null tests); literal types are kept (``'12'`` is
  not ``12``).
- **Query relationships**: the column pairs of explicit and implicit joins, ``IN
  (subquery)`` semi-joins and correlated references; multi-column keys stay tuples.
- **Boundary bindings**: the values that close temporal or numeric intervals, including
  ``datetime(col) <= datetime('2105-12-31', '-3 year')`` (the constant side is evaluated by
  SQLite itself).
- **Target bindings**: equality literals that the question names explicitly.
- **Witnesses**: for each block that filters or joins, the block's own FROM/JOIN/WHERE with
  its projection replaced by the row ids of its base tables. Executed on the database, a
  witness returns exactly the rows (and matched row tuples) that the block's predicates and
  joins accept, with SQLite's own operator semantics.

Expressions none of these cover are recorded as ``unsupported`` and left to execution
validation; nothing is guessed from strings.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from builder.transform.resolve import BaseRef, DerivedRef, Resolution, parse, resolve
from builder.transform.schema import Schema, quote_ident

logger = logging.getLogger(__name__)

_RANGE_OPS = {"GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


@dataclass(frozen=True, kw_only=True)
class PredicateBinding:
    """A base column bound by a literal predicate in query block ``block``."""

    block: int
    table: str
    column: str
    kind: str
    op: str
    values: tuple[Any, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "block": self.block,
            "table": self.table,
            "column": self.column,
            "kind": self.kind,
            "op": self.op,
            "values": list(self.values),
        }


@dataclass(frozen=True, kw_only=True)
class QueryRelationship:
    """Matched column tuples between two base tables (``kind``: join, semi_join, correlated).

    For ``semi_join`` the left side is the filtered (outer) table and the right side the
    subquery's projected column: every protected left row needs a right match.
    """

    block: int
    kind: str
    left: str
    left_columns: tuple[str, ...]
    right: str
    right_columns: tuple[str, ...]

    def describe(self) -> str:
        """``a(x) = b(y)`` for messages."""
        return (
            f"{self.left}({', '.join(self.left_columns)}) = "
            f"{self.right}({', '.join(self.right_columns)})"
        )

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "block": self.block,
            "kind": self.kind,
            "left": self.left,
            "left_columns": list(self.left_columns),
            "right": self.right,
            "right_columns": list(self.right_columns),
        }


@dataclass(frozen=True, kw_only=True)
class BoundaryBinding:
    """A value closing an interval on a column (``expression`` when wrapped in a function)."""

    block: int
    table: str
    column: str
    op: str
    value: Any
    expression: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "block": self.block,
            "table": self.table,
            "column": self.column,
            "op": self.op,
            "value": self.value,
            "expression": self.expression,
        }


@dataclass(frozen=True, kw_only=True)
class TargetBinding:
    """An entity the question names: rows with ``table.column = value`` must stay."""

    table: str
    column: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {"table": self.table, "column": self.column, "value": self.value}


@dataclass(frozen=True, kw_only=True)
class Witness:
    """The row-id query of one block: ``tables`` are (source name, table) per output."""

    block: int
    sql: str
    tables: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {"block": self.block, "sql": self.sql, "tables": [t for _s, t in self.tables]}


@dataclass(frozen=True, kw_only=True)
class Safeguards:
    """Everything the sampler must protect for one query."""

    predicates: tuple[PredicateBinding, ...] = ()
    relationships: tuple[QueryRelationship, ...] = ()
    boundaries: tuple[BoundaryBinding, ...] = ()
    targets: tuple[TargetBinding, ...] = ()
    witnesses: tuple[Witness, ...] = ()
    unsupported: tuple[str, ...] = ()
    tables_read: tuple[str, ...] = ()
    projection_width: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record for the ledger."""
        return {
            "predicates": [p.to_json() for p in self.predicates],
            "relationships": [r.to_json() for r in self.relationships],
            "boundaries": [b.to_json() for b in self.boundaries],
            "targets": [t.to_json() for t in self.targets],
            "witnesses": [w.to_json() for w in self.witnesses],
            "unsupported": list(self.unsupported),
            "tables_read": list(self.tables_read),
            "projection_width": self.projection_width,
            "notes": list(self.notes),
        }


def extract_safeguards(
    sql: str, schema: Schema, *, question: str | None = None, conn: sqlite3.Connection | None = None
) -> Safeguards:
    """Read the safeguards of ``sql`` against ``schema``.

    Args:
        sql: the (translated) query.
        schema: the database schema it runs on.
        question: the question, for target bindings.
        conn: a connection used to evaluate constant boundary expressions.

    Raises:
        ValueError: one line, when the SQL does not parse or a column does not resolve.
    """
    tree = parse(sql)
    res = resolve(tree, schema.columns_by_table())
    if res.problems:
        raise ValueError("; ".join(p.describe() for p in res.problems))
    return _Extractor(tree, res, schema, question, conn).run()


class _Extractor:
    def __init__(
        self,
        tree: Any,
        res: Resolution,
        schema: Schema,
        question: str | None,
        conn: sqlite3.Connection | None,
    ) -> None:
        self.tree = tree
        self.res = res
        self.schema = schema
        self.question = question or ""
        self.conn = conn
        self.preds: list[PredicateBinding] = []
        self.rels: list[QueryRelationship] = []
        self.bounds: list[BoundaryBinding] = []
        self.unsupported: list[str] = []
        self.notes: list[str] = []
        self.by_expr = {id(s.expression): s for s in res.scopes}
        self._const_cache: dict[str, Any] = {}

    def run(self) -> Safeguards:
        from sqlglot import exp

        witnesses: list[Witness] = []
        for block, scope in enumerate(self.res.scopes):
            sel = scope.expression
            if not isinstance(sel, exp.Select):
                continue
            conds: list[Any] = []
            where = sel.args.get("where")
            if where is not None:
                conds.extend(_conjuncts(where.this))
            for join in sel.args.get("joins") or []:
                on = join.args.get("on")
                if on is not None:
                    conds.extend(_conjuncts(on))
            pairs: dict[tuple[str, str, str, str, str], list[tuple[str, str]]] = {}
            for cond in conds:
                self._condition(block, cond, pairs)
            for (lt, ls, rt, rs, kind), cols in pairs.items():
                del ls, rs
                self.rels.append(
                    QueryRelationship(
                        block=block,
                        kind=kind,
                        left=lt,
                        left_columns=tuple(c[0] for c in cols),
                        right=rt,
                        right_columns=tuple(c[1] for c in cols),
                    )
                )
            joins_without_on = [
                j
                for j in sel.args.get("joins") or []
                if j.args.get("on") is None and not j.args.get("using")
            ]
            if conds or joins_without_on:
                w = self._witness(block, scope)
                if w is not None:
                    witnesses.append(w)
        tables = sorted({t for t in self.res.tables.values()}, key=str.lower)
        return Safeguards(
            predicates=tuple(_unique(self.preds)),
            relationships=tuple(_unique(self.rels)),
            boundaries=tuple(_unique(self.bounds)),
            targets=tuple(self._targets()),
            witnesses=tuple(witnesses),
            unsupported=tuple(_unique(self.unsupported)),
            tables_read=tuple(tables),
            projection_width=self._width(),
            notes=tuple(self.notes),
        )

    # ---- conditions -------------------------------------------------------------------
    def _bind(self, block: int, col: Any, kind: str, op: str, values: tuple[Any, ...]) -> None:
        self.preds.append(
            PredicateBinding(
                block=block, table=col.table, column=col.column, kind=kind, op=op, values=values
            )
        )

    def _bound(self, block: int, col: Any, op: str, value: Any) -> None:
        self.bounds.append(
            BoundaryBinding(block=block, table=col.table, column=col.column, op=op, value=value)
        )

    def _condition(
        self,
        block: int,
        cond: Any,
        pairs: dict[tuple[str, str, str, str, str], list[tuple[str, str]]],
    ) -> None:
        from sqlglot import exp

        name = type(cond).__name__
        if isinstance(cond, exp.EQ):
            left, right = _strip(cond.this), _strip(cond.expression)
            lcol, rcol = self._base(left), self._base(right)
            if lcol and rcol:
                self._pair(block, lcol, rcol, pairs)
                return
            col, other = (lcol, right) if lcol else (rcol, left)
            ok, value = _literal(other)
            if col and ok:
                self._bind(block, col, "equality", "=", (value,))
                return
        elif name in _RANGE_OPS:
            op = _RANGE_OPS[name]
            left, right = _strip(cond.this), _strip(cond.expression)
            lcol, rcol = self._base(left), self._base(right)
            if lcol and rcol:
                self._pair(block, lcol, rcol, pairs, kind_if_local="range_join")
                return
            col, other, op2 = (lcol, right, op) if lcol else (rcol, left, _FLIP[op])
            ok, value = _literal(other)
            if col and ok:
                self._bind(block, col, "range", op2, (value,))
                self._bound(block, col, op2, value)
                return
            wrapped = self._wrapped_boundary(block, left, right, op) or self._wrapped_boundary(
                block, right, left, _FLIP[op]
            )
            if wrapped:
                return
        elif isinstance(cond, exp.Between):
            col = self._base(_strip(cond.this))
            ok1, low = _literal(cond.args.get("low"))
            ok2, high = _literal(cond.args.get("high"))
            if col and ok1 and ok2:
                self._bind(block, col, "range", "between", (low, high))
                self._bound(block, col, ">=", low)
                self._bound(block, col, "<=", high)
                return
        elif isinstance(cond, exp.In):
            if self._in(block, cond):
                return
        elif isinstance(cond, (exp.Like, exp.Glob)) and not cond.args.get("negate"):
            col = self._base(_strip(cond.this))
            ok, value = _literal(cond.expression)
            if col and ok and isinstance(value, str):
                op = "like" if isinstance(cond, exp.Like) else "glob"
                self._bind(block, col, "pattern", op, (value,))
                return
        elif isinstance(cond, exp.Is) and isinstance(cond.expression, exp.Null):
            col = self._base(_strip(cond.this))
            if col:
                self._bind(block, col, "null", "is null", ())
                return
        elif (
            isinstance(cond, exp.Not)
            and isinstance(cond.this, exp.Is)
            and isinstance(cond.this.expression, exp.Null)
        ):
            col = self._base(_strip(cond.this.this))
            if col:
                self._bind(block, col, "null", "is not null", ())
                return
        elif isinstance(cond, exp.Exists):
            return  # its correlation predicates belong to the inner block
        self.unsupported.append(cond.sql(dialect="sqlite"))

    def _in(self, block: int, cond: Any) -> bool:
        from sqlglot import exp

        query = cond.args.get("query")
        lhs = _strip(cond.this)
        if query is None:
            col = self._base(lhs)
            values = []
            for e in cond.expressions:
                ok, v = _literal(e)
                if not ok:
                    return False
                values.append(v)
            if col and values:
                self._bind(block, col, "membership", "in", tuple(values))
                return True
            return False
        inner = query.this if isinstance(query, exp.Subquery) else query
        scope = self.by_expr.get(id(inner))
        if scope is None:
            return False
        outs = self.res.outputs.get(id(scope), [])
        lhs_cols = list(lhs.expressions) if isinstance(lhs, exp.Tuple) else [lhs]
        if len(outs) < len(lhs_cols):
            return False
        left_bases = [self._base(_strip(c)) for c in lhs_cols]
        right_bases = [o.base for o in outs[: len(lhs_cols)]]
        if not all(left_bases) or not all(right_bases):
            self.notes.append(
                f"semi-join without plain columns left to execution: "
                f"{cond.sql(dialect='sqlite')[:120]}"
            )
            return True
        lt = {b.table for b in left_bases if b}
        rt = {b.table for b in right_bases if b}
        if len(lt) != 1 or len(rt) != 1:
            return True
        self.rels.append(
            QueryRelationship(
                block=block,
                kind="semi_join",
                left=lt.pop(),
                left_columns=tuple(b.column for b in left_bases if b),
                right=rt.pop(),
                right_columns=tuple(b.column for b in right_bases if b),
            )
        )
        return True

    def _pair(
        self,
        block: int,
        a: BaseRef,
        b: BaseRef,
        pairs: dict[tuple[str, str, str, str, str], list[tuple[str, str]]],
        kind_if_local: str = "join",
    ) -> None:
        if kind_if_local == "range_join":
            self.unsupported.append(f"range join {a.table}.{a.column} ~ {b.table}.{b.column}")
            return
        if a.source == b.source and a.table == b.table and not (a.outer or b.outer):
            self.unsupported.append(f"same-row comparison {a.table}.{a.column} = {b.column}")
            return
        kind = "correlated" if (a.outer or b.outer) else "join"
        if (b.table, b.source) < (a.table, a.source):
            a, b = b, a
        key = (a.table, a.source, b.table, b.source, kind)
        pairs.setdefault(key, []).append((a.column, b.column))

    def _wrapped_boundary(self, block: int, side: Any, other: Any, op: str) -> bool:
        from sqlglot import exp

        if not isinstance(side, exp.Func):
            return False
        cols = [c for c in side.find_all(exp.Column)]
        if (
            len(cols) != 1
            or any(True for _ in other.find_all(exp.Column))
            or any(True for _ in other.find_all(exp.Select))
        ):
            return False
        base = self._base(cols[0])
        if base is None:
            return False
        value = self._constant(other)
        self.bounds.append(
            BoundaryBinding(
                block=block,
                table=base.table,
                column=base.column,
                op=op,
                value=value,
                expression=side.sql(dialect="sqlite"),
            )
        )
        return True

    def _constant(self, node: Any) -> Any:
        ok, value = _literal(node)
        if ok:
            return value
        text = node.sql(dialect="sqlite")
        if self.conn is None:
            return text
        if text not in self._const_cache:
            try:
                self._const_cache[text] = self.conn.execute(f"select {text}").fetchone()[0]
            except sqlite3.Error:
                self._const_cache[text] = text
        return self._const_cache[text]

    def _base(self, node: Any) -> BaseRef | None:
        from sqlglot import exp

        if not isinstance(node, exp.Column):
            return None
        ref = self.res.columns.get(id(node))
        if isinstance(ref, BaseRef):
            return ref
        if isinstance(ref, DerivedRef) and ref.base is not None:
            return BaseRef(
                table=ref.base.table,
                column=ref.base.column,
                source=ref.source,
                by_table_name=False,
                outer=ref.outer,
            )
        return None

    # ---- targets, witnesses, width ---------------------------------------------------
    def _targets(self) -> list[TargetBinding]:
        if not self.question:
            return []
        q = self.question.lower()
        out: list[TargetBinding] = []
        for p in self.preds:
            if p.kind not in ("equality", "membership"):
                continue
            for v in p.values:
                if (isinstance(v, str) and v.strip() and v.lower() in q) or (
                    isinstance(v, int | float)
                    and not isinstance(v, bool)
                    and re.search(rf"(?<![\d.]){re.escape(_num(v))}(?![\d.])", q)
                ):
                    out.append(TargetBinding(table=p.table, column=p.column, value=v))
        return _unique(out)

    def _witness(self, block: int, scope: Any) -> Witness | None:
        from sqlglot import exp

        sel = scope.expression.copy()
        projections: list[Any] = []
        tables: list[tuple[str, str]] = []
        for key, (node, source) in scope.selected_sources.items():
            if not (isinstance(node, exp.Table) and isinstance(source, exp.Table)):
                continue
            table = self.res.tables.get(id(node))
            info = self.schema.table(table) if table else None
            if info is None or info.without_rowid:
                continue
            projections.append(
                exp.alias_(
                    exp.column("rowid", table=exp.to_identifier(key, quoted=True)),
                    f"__w{len(projections)}",
                )
            )
            tables.append((key, info.name))
        if not projections:
            return None
        for arg in (
            "group",
            "having",
            "order",
            "limit",
            "offset",
            "distinct",
            "qualify",
            "windows",
        ):
            if sel.args.get(arg) is not None:
                sel.set(arg, None)
        sel.set("expressions", projections)
        root_with = self.tree.args.get("with")
        if (
            root_with is not None
            and sel.args.get("with") is None
            and scope.expression is not self.tree
        ):
            sel.set("with", root_with.copy())
        return Witness(block=block, sql=sel.sql(dialect="sqlite"), tables=tuple(tables))

    def _width(self) -> int | None:
        outs = self.res.outputs.get(id(self.res.scopes[-1])) if self.res.scopes else None
        return len(outs) if outs else None


def _conjuncts(node: Any) -> list[Any]:
    from sqlglot import exp

    node = _strip(node)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _strip(node: Any) -> Any:
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _literal(node: Any) -> tuple[bool, Any]:
    """(True, python value) for a string/number literal, keeping its type."""
    from sqlglot import exp

    node = _strip(node)
    neg = False
    if isinstance(node, exp.Neg):
        neg, node = True, _strip(node.this)
    if not isinstance(node, exp.Literal):
        return False, None
    if node.is_string:
        return (not neg), node.this
    text = node.this
    try:
        value: Any = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return False, None
    return True, -value if neg else value


def _num(v: float | int) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _unique(items: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for it in items:
        if it not in seen:
            seen.append(it)
    return seen


def predicate_sql(p: PredicateBinding) -> tuple[str, list[Any]]:
    """A ``WHERE`` clause (and its parameters) selecting the rows a binding matches.

    >>> predicate_sql(PredicateBinding(block=0, table="t", column="c", kind="membership",
    ...                                op="in", values=("a", 2)))
    ('"c" IN (?, ?)', ['a', 2])
    """
    col = quote_ident(p.column)
    if p.kind == "equality":
        return f"{col} = ?", list(p.values)
    if p.kind == "membership":
        return f"{col} IN ({', '.join('?' for _ in p.values)})", list(p.values)
    if p.kind == "range" and p.op == "between":
        return f"{col} BETWEEN ? AND ?", list(p.values)
    if p.kind == "range":
        return f"{col} {p.op} ?", list(p.values)
    if p.kind == "pattern":
        return f"{col} {p.op.upper()} ?", list(p.values)
    if p.kind == "null":
        return f"{col} {p.op.upper()}", []
    raise ValueError(f"no SQL for predicate kind {p.kind!r}")


__all__ = [
    "BoundaryBinding",
    "PredicateBinding",
    "QueryRelationship",
    "Safeguards",
    "TargetBinding",
    "Witness",
    "extract_safeguards",
    "predicate_sql",
]
