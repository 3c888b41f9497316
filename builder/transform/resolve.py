"""Resolve every column of a query to what it reads, scope by scope (sqlglot scopes).

A query is a tree of scopes: the root select, CTEs, derived tables, subqueries and union
branches. Inside each scope a column resolves the way SQLite resolves it: a qualified
column through its qualifier (an alias, a table name, a CTE or a derived table, looked up in
this scope and then in enclosing scopes for correlated references); an unqualified column
against the sources selected in its own scope, then against the projection aliases, then
against enclosing scopes. An unqualified column that two sources provide is *ambiguous* and
is reported, never guessed; a column that nothing provides is *unknown*.

Both builder stages use this: stage 1 renames identifiers and literals by their resolved
column, stage 2 turns predicates and joins into safeguards on base-table columns.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class BaseRef:
    """A column of a base table.

    Attributes:
        table: the table's name as the schema declares it.
        column: the column's name as the schema declares it.
        source: the name the scope knows the table by (its alias, or its own name).
        by_table_name: the table is referenced by its own name (no alias), so a qualifier
            that names it must follow a table rename.
        outer: resolved in an enclosing scope (a correlated reference).
    """

    table: str
    column: str
    source: str
    by_table_name: bool
    outer: bool = False


@dataclass(frozen=True, kw_only=True)
class DerivedRef:
    """An output column of a CTE or derived table.

    Attributes:
        source: the CTE or derived-table name in the referencing scope.
        name: the output column name.
        base: the base column the output is a plain copy of, when it is one.
        scope_id: ``id`` of the scope that produces the output.
        outer: resolved in an enclosing scope.
    """

    source: str
    name: str
    base: BaseRef | None
    scope_id: int
    outer: bool = False


@dataclass(frozen=True, kw_only=True)
class AliasRef:
    """A reference to a projection alias of the same scope (``ORDER BY total``)."""

    name: str


@dataclass(frozen=True, kw_only=True)
class Problem:
    """A column or table that does not resolve.

    Attributes:
        kind: ``ambiguous_column``, ``unknown_column`` or ``unknown_table``.
        name: the offending name as written.
        candidates: for ambiguous columns, the sources that provide it.
    """

    kind: str
    name: str
    candidates: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line for reports."""
        if self.kind == "ambiguous_column":
            return f"ambiguous unqualified column {self.name!r} (in {', '.join(self.candidates)})"
        if self.kind == "unknown_table":
            return f"unknown table {self.name!r}"
        return f"unknown column {self.name!r}"


Ref = BaseRef | DerivedRef | AliasRef


@dataclass(frozen=True, kw_only=True)
class Output:
    """One output column of a scope: its name, projection node and base provenance."""

    name: str
    node: Any
    base: BaseRef | None
    star_from: str | None = None


@dataclass(kw_only=True)
class Resolution:
    """The resolved query.

    Attributes:
        tree: the parsed query (sqlglot expression).
        scopes: every scope, innermost first.
        columns: ``id(column node) -> Ref`` for every column that resolved.
        column_scope: ``id(column node) -> scope`` owning it.
        tables: ``id(table node) -> schema table name`` for base-table references.
        cte_tables: ids of table nodes that reference a CTE.
        outputs: ``id(scope) -> outputs``.
        problems: what did not resolve.
    """

    tree: Any
    scopes: list[Any]
    columns: dict[int, Ref] = field(default_factory=dict)
    column_scope: dict[int, Any] = field(default_factory=dict)
    tables: dict[int, str] = field(default_factory=dict)
    cte_tables: set[int] = field(default_factory=set)
    outputs: dict[int, list[Output]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def base_of(self, node: Any) -> BaseRef | None:
        """The base column a column node stands for, through CTEs and derived tables."""
        ref = self.columns.get(id(node))
        if isinstance(ref, BaseRef):
            return ref
        if isinstance(ref, DerivedRef):
            return ref.base
        return None

    def base_columns(self) -> list[tuple[str, str]]:
        """Every (table, column) the query reads, sorted, without repeats."""
        seen = {(r.table, r.column) for r in self.columns.values() if isinstance(r, BaseRef)}
        return sorted(seen)


class SchemaView:
    """Case-insensitive lookup of tables and columns (SQLite identifiers ignore case)."""

    def __init__(self, schema: Mapping[str, Sequence[str]]) -> None:
        self._tables = {t.lower(): t for t in schema}
        self._cols = {t.lower(): {c.lower(): c for c in cols} for t, cols in schema.items()}

    def table(self, name: str) -> str | None:
        """The declared name of table ``name``, or None."""
        return self._tables.get(name.lower())

    def column(self, table: str, name: str) -> str | None:
        """The declared name of ``table.name``, or None."""
        return self._cols.get(table.lower(), {}).get(name.lower())

    def columns(self, table: str) -> list[str]:
        """The columns of ``table`` in declaration order."""
        return list(self._cols.get(table.lower(), {}).values())


def parse(sql: str) -> Any:
    """Parse one SQLite statement with sqlglot.

    Raises:
        ValueError: one line, when the SQL does not parse or is empty.
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        trees = [t for t in sqlglot.parse(sql, read="sqlite") if t is not None]
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"sql does not parse: {first}") from None
    if len(trees) != 1:
        raise ValueError("sql must hold exactly one statement")
    return trees[0]


def resolve(tree_or_sql: Any, schema: Mapping[str, Sequence[str]]) -> Resolution:
    """Resolve every table and column of a query against ``schema``.

    Args:
        tree_or_sql: SQL text or a parsed sqlglot expression (not modified).
        schema: ``{table: [column, ...]}``.

    >>> r = resolve("select t.a, b from t join u on t.a = u.a",
    ...             {"t": ["a", "b"], "u": ["a", "c"]})
    >>> sorted(r.base_columns()), r.problems
    ([('t', 'a'), ('t', 'b'), ('u', 'a')], [])
    >>> [p.describe() for p in resolve("select a from t, u", {"t": ["a"], "u": ["a"]}).problems]
    ["ambiguous unqualified column 'a' (in t, u)"]
    """
    from sqlglot.optimizer.scope import traverse_scope

    tree = parse(tree_or_sql) if isinstance(tree_or_sql, str) else tree_or_sql
    view = SchemaView(schema)
    scopes = list(traverse_scope(tree))
    res = Resolution(tree=tree, scopes=scopes)
    by_expr = {id(s.expression): s for s in scopes}
    _Resolver(res, view, by_expr).run()
    return res


class _Resolver:
    def __init__(self, res: Resolution, view: SchemaView, by_expr: dict[int, Any]) -> None:
        self.res = res
        self.view = view
        self.by_expr = by_expr

    def run(self) -> None:
        from sqlglot import exp

        # Which scope owns each column: the nearest enclosing scope expression.
        owned: dict[int, list[Any]] = {}
        for col in self.res.tree.find_all(exp.Column):
            if isinstance(col.this, exp.Star):
                continue
            scope = self._owner(col)
            if scope is None:
                continue
            self.res.column_scope[id(col)] = scope
            owned.setdefault(id(scope), []).append(col)
        for scope in self.res.scopes:
            self._tables(scope)
            for col in owned.get(id(scope), []):
                ref = self._column(scope, col)
                if ref is not None:
                    self.res.columns[id(col)] = ref
            self.res.outputs[id(scope)] = self._outputs(scope)

    def _owner(self, node: Any) -> Any:
        cur = node.parent
        while cur is not None:
            scope = self.by_expr.get(id(cur))
            if scope is not None:
                return scope
            cur = cur.parent
        return None

    # ---- tables -----------------------------------------------------------------------
    def _tables(self, scope: Any) -> None:
        from sqlglot import exp

        for _name, (node, source) in scope.selected_sources.items():
            if isinstance(source, exp.Table) and isinstance(node, exp.Table):
                real = self.view.table(source.name)
                if real is None:
                    self._problem("unknown_table", source.name)
                else:
                    self.res.tables[id(node)] = real
            elif isinstance(node, exp.Table):
                self.res.cte_tables.add(id(node))

    # ---- columns ----------------------------------------------------------------------
    def _column(self, scope: Any, col: Any) -> Ref | None:
        from sqlglot import exp

        name = col.name
        qualifier = col.table
        if qualifier:
            cur, outer = scope, False
            while cur is not None:
                hit = _ci_get(cur.sources, qualifier)
                if hit is not None:
                    key, source = hit
                    return self._in_source(key, source, name, outer, col, cur)
                cur, outer = cur.parent, True
            self._problem("unknown_table", qualifier)
            return None
        in_order = (
            col.find_ancestor(exp.Order) is not None
            and self._owner(col.find_ancestor(exp.Order)) is scope
        )
        if in_order:
            alias = self._alias(scope, name)
            if alias is not None:
                return alias
        cur, outer = scope, False
        while cur is not None:
            found = [
                (key, source)
                for key, (_node, source) in cur.selected_sources.items()
                if self._provides(source, name)
            ]
            if len(found) == 1:
                key, source = found[0]
                return self._in_source(key, source, name, outer, col, cur)
            if len(found) > 1:
                self._problem("ambiguous_column", name, tuple(k for k, _ in found))
                return None
            if cur is scope:
                alias = self._alias(scope, name)
                if alias is not None:
                    return alias
            cur, outer = cur.parent, True
        self._problem("unknown_column", name)
        return None

    def _in_source(
        self, key: str, source: Any, name: str, outer: bool, col: Any, scope: Any
    ) -> Ref | None:
        from sqlglot import exp

        if isinstance(source, exp.Table):
            table = self.view.table(source.name)
            if table is None:
                self._problem("unknown_table", source.name)
                return None
            column = self.view.column(table, name)
            if column is None:
                self._problem("unknown_column", f"{key}.{name}")
                return None
            by_name = not source.alias and key.lower() == source.name.lower()
            return BaseRef(
                table=table, column=column, source=key, by_table_name=by_name, outer=outer
            )
        out = self._output(source, name)
        if out is None:
            self._problem("unknown_column", f"{key}.{name}")
            return None
        return DerivedRef(
            source=key, name=out.name, base=out.base, scope_id=id(source), outer=outer
        )

    def _provides(self, source: Any, name: str) -> bool:
        from sqlglot import exp

        if isinstance(source, exp.Table):
            table = self.view.table(source.name)
            return table is not None and self.view.column(table, name) is not None
        return self._output(source, name) is not None

    def _output(self, scope: Any, name: str) -> Output | None:
        low = name.lower()
        for out in self.res.outputs.get(id(scope), []):
            if out.name.lower() == low:
                return out
        return None

    def _alias(self, scope: Any, name: str) -> AliasRef | None:
        from sqlglot import exp

        expr = scope.expression
        if not isinstance(expr, exp.Select):
            return None
        for proj in expr.expressions:
            if isinstance(proj, exp.Alias) and proj.alias.lower() == name.lower():
                return AliasRef(name=proj.alias)
        return None

    # ---- outputs ----------------------------------------------------------------------
    def _outputs(self, scope: Any) -> list[Output]:
        from sqlglot import exp

        expr = scope.expression
        if not isinstance(expr, exp.Select):
            branches = getattr(scope, "union_scopes", None) or []
            return list(self.res.outputs.get(id(branches[0]), [])) if branches else []
        outs: list[Output] = []
        for proj in expr.expressions:
            if isinstance(proj, exp.Star):
                for key, (_node, source) in scope.selected_sources.items():
                    outs.extend(self._expand(key, source))
            elif isinstance(proj, exp.Column) and isinstance(proj.this, exp.Star):
                hit = _ci_get(scope.sources, proj.table)
                if hit is not None:
                    outs.extend(self._expand(*hit))
            elif isinstance(proj, exp.Alias):
                base = self.res.base_of(proj.this) if isinstance(proj.this, exp.Column) else None
                outs.append(Output(name=proj.alias, node=proj, base=base))
            elif isinstance(proj, exp.Column):
                outs.append(Output(name=proj.name, node=proj, base=self.res.base_of(proj)))
            else:
                outs.append(Output(name=proj.sql(dialect="sqlite"), node=proj, base=None))
        return outs

    def _expand(self, key: str, source: Any) -> list[Output]:
        from sqlglot import exp

        if isinstance(source, exp.Table):
            table = self.view.table(source.name)
            if table is None:
                return []
            by_name = not source.alias and key.lower() == source.name.lower()
            return [
                Output(
                    name=c,
                    node=None,
                    star_from=key,
                    base=BaseRef(table=table, column=c, source=key, by_table_name=by_name),
                )
                for c in self.view.columns(table)
            ]
        return [
            Output(name=o.name, node=None, base=o.base, star_from=key)
            for o in self.res.outputs.get(id(source), [])
        ]

    def _problem(self, kind: str, name: str, candidates: tuple[str, ...] = ()) -> None:
        prob = Problem(kind=kind, name=name, candidates=candidates)
        if prob not in self.res.problems:
            self.res.problems.append(prob)


def _ci_get(mapping: Mapping[str, Any], key: str) -> tuple[str, Any] | None:
    if key in mapping:
        return key, mapping[key]
    low = key.lower()
    for k, v in mapping.items():
        if k.lower() == low:
            return k, v
    return None


def comparison_column(literal: Any, res: Resolution) -> tuple[Any, BaseRef | None] | None:
    """The column a literal is compared with, and its base column when it has one.

    Recognized contexts: ``col <op> lit`` for = != < <= > >=, ``col [NOT] IN (lit, ...)``,
    ``col BETWEEN lit AND lit``, ``col [NOT] LIKE/GLOB lit`` (either operand order, through
    parentheses). Anything else returns None.
    """
    from sqlglot import exp

    node = literal
    parent = node.parent
    while isinstance(parent, exp.Paren):
        node, parent = parent, parent.parent
    other: Any = None
    if isinstance(parent, (exp.In, exp.Between)):
        if node is not parent.this:
            other = parent.this
    elif isinstance(
        parent, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.Glob)
    ):
        other = parent.expression if node is parent.this else parent.this
    if other is None:
        return None
    while isinstance(other, exp.Paren):
        other = other.this
    if not isinstance(other, exp.Column):
        return None
    return other, res.base_of(other)


def columns_in(node: Any) -> Iterable[Any]:
    """Every column node under ``node`` (stars excluded)."""
    from sqlglot import exp

    for col in node.find_all(exp.Column):
        if not isinstance(col.this, exp.Star):
            yield col


__all__ = [
    "AliasRef",
    "BaseRef",
    "DerivedRef",
    "Output",
    "Problem",
    "Ref",
    "Resolution",
    "SchemaView",
    "columns_in",
    "comparison_column",
    "parse",
    "resolve",
]
