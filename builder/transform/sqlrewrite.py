"""Protect–replace–restore rewriting of a query under a replacement map.

The rewrite migrates a workload; it never generates a new query.

1. **Parse and resolve** the query against the source schema, scope by scope
   (``builder.transform.resolve``).
2. **Protect**: every string literal is swapped for a typed marker, and alias and CTE
   names are recorded as untouchable, so no later step can substitute inside them, inside
   keywords, function names, numbers or partial identifiers.
3. **Replace**, innermost scope first: base tables through ``M.tables``; each column
   through ``M.columns`` of the table it resolves to (a qualifier that names a table by its
   own name follows the table rename; an output column of a CTE or derived table follows the
   name its producing scope now gives it). A literal's marker receives a translation only
   when its comparison resolves to a column whose cluster holds that value, so one surface
   form in two unrelated columns gets each column's own target.
4. **Restore** the markers and serialize; the result must parse again and, when the target
   schema is given, resolve against it.

An ambiguous unqualified column is flagged for repair and left as written.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from builder.transform.mapping import ReplacementMap
from builder.transform.resolve import (
    AliasRef,
    BaseRef,
    DerivedRef,
    Resolution,
    comparison_column,
    parse,
    resolve,
)

logger = logging.getLogger(__name__)

BLOCKING_FLAGS = frozenset(
    {
        "ambiguous_column",
        "unknown_column",
        "unknown_table",
        "unresolved_after_rewrite",
        "does_not_parse",
    }
)
"""Flags that stop a rewritten query from being used until it is repaired."""

_PLAIN_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MARK = "\x00lit{}\x00"
_MARK_RE = re.compile(r"^\x00lit(\d+)\x00$")


@dataclass(frozen=True, kw_only=True)
class Flag:
    """Something the rewrite noticed: ``kind`` and a one-line ``detail``."""

    kind: str
    detail: str

    @property
    def blocking(self) -> bool:
        """True when the rewritten query cannot be used as it is."""
        return self.kind in BLOCKING_FLAGS


@dataclass(frozen=True, kw_only=True)
class RewriteResult:
    """A rewritten query and what changed.

    Attributes:
        sql: the rewritten SQL (the input unchanged when nothing had to change).
        tables: ``{source: target}`` table renames applied.
        columns: ``{"table.column": target}`` column renames applied.
        literals: ``(source, target, "table.column")`` literal translations applied.
        flags: problems and notes; any blocking flag means the rewrite needs repair.
    """

    sql: str
    tables: Mapping[str, str] = field(default_factory=dict)
    columns: Mapping[str, str] = field(default_factory=dict)
    literals: tuple[tuple[str, str, str], ...] = ()
    flags: tuple[Flag, ...] = ()

    @property
    def ok(self) -> bool:
        """No blocking flag."""
        return not any(f.blocking for f in self.flags)

    def problems(self) -> list[str]:
        """The blocking flags as one-line messages."""
        return [f"{f.kind}: {f.detail}" for f in self.flags if f.blocking]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record for the ledger."""
        return {
            "sql": self.sql,
            "tables": dict(self.tables),
            "columns": dict(self.columns),
            "literals": [list(x) for x in self.literals],
            "flags": [{"kind": f.kind, "detail": f.detail} for f in self.flags],
        }


def identifier(name: str) -> Any:
    """A sqlglot identifier, quoted unless it is a plain ASCII name that is no keyword.

    >>> identifier("fund").sql(), identifier("基金").sql(), identifier("select").sql()
    ('fund', '"基金"', '"select"')
    """
    from sqlglot import exp
    from sqlglot.tokens import Tokenizer

    quoted = not _PLAIN_IDENT.fullmatch(name) or name.upper() in Tokenizer.KEYWORDS
    return exp.Identifier(this=name, quoted=quoted)


def _is_pattern(literal: Any, value: str) -> bool:
    from sqlglot import exp

    parent = literal.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, (exp.Like, exp.ILike)):
        return "%" in value or "_" in value
    if isinstance(parent, exp.Glob):
        return any(ch in value for ch in "*?[")
    return False


def rewrite_sql(
    sql: str,
    mapping: ReplacementMap,
    schema: Mapping[str, Sequence[str]],
    *,
    target_schema: Mapping[str, Sequence[str]] | None = None,
) -> RewriteResult:
    """Rewrite ``sql`` from the source database's names and values to the translated ones.

    Args:
        sql: the source query (SQLite).
        mapping: the replacement map.
        schema: the source schema ``{table: [column, ...]}``.
        target_schema: the translated schema; when given, the result must resolve in it.

    Returns:
        The rewrite; check ``ok`` (an ambiguous or unknown column is flagged, not guessed).

    >>> from builder.transform.mapping import ColumnMapping, TableMapping, ValueMapping
    >>> m = ReplacementMap(source_language="en", target_language="zh",
    ...     tables=(TableMapping(source="fund", target="基金"),),
    ...     columns=(ColumnMapping(table_source="fund", source="kind", target="类型"),),
    ...     values=(ValueMapping(cluster_id="c1", source="bond", target="债券型",
    ...                          occurrences=(("fund", "kind"),)),))
    >>> print(rewrite_sql("select fund.kind from fund where fund.kind = 'bond'", m,
    ...                   {"fund": ["kind"]}).sql)
    SELECT "基金"."类型" FROM "基金" WHERE "基金"."类型" = '债券型'
    """
    try:
        tree = parse(sql)
    except ValueError as exc:
        return RewriteResult(sql=sql, flags=(Flag(kind="does_not_parse", detail=str(exc)),))
    res = resolve(tree, schema)
    flags = [Flag(kind=p.kind, detail=p.describe()) for p in res.problems]
    if mapping.is_identity:
        return RewriteResult(sql=sql, flags=tuple(flags))
    rw = _Rewriter(tree, res, mapping)
    rw.run()
    flags.extend(rw.flags)
    out_sql = tree.sql(dialect="sqlite") if rw.changed else sql
    if rw.changed:
        try:
            again = parse(out_sql)
        except ValueError as exc:
            flags.append(Flag(kind="does_not_parse", detail=f"after rewrite: {exc}"))
            again = None
        if again is not None and target_schema is not None:
            for p in resolve(again, target_schema).problems:
                flags.append(Flag(kind="unresolved_after_rewrite", detail=p.describe()))
    return RewriteResult(
        sql=out_sql,
        tables=rw.tables,
        columns=rw.columns,
        literals=tuple(rw.literals),
        flags=tuple(flags),
    )


class _Rewriter:
    def __init__(self, tree: Any, res: Resolution, mapping: ReplacementMap) -> None:
        self.tree = tree
        self.res = res
        self.m = mapping
        self.changed = False
        self.tables: dict[str, str] = {}
        self.columns: dict[str, str] = {}
        self.literals: list[tuple[str, str, str]] = []
        self.flags: list[Flag] = []
        self.out_names: dict[int, dict[str, str]] = {}

    def run(self) -> None:
        markers = self._protect()
        protected = self._protected_identifiers()
        before = {i: n.this for i, n in protected.items()}
        by_scope: dict[int, list[Any]] = {}
        for col_id, scope in self.res.column_scope.items():
            by_scope.setdefault(id(scope), []).append(col_id)
        nodes = {id(c): c for c in self.tree.find_all(_column_type())}
        for scope in self.res.scopes:  # innermost first
            self._scope_tables(scope)
            for col_id in by_scope.get(id(scope), []):
                node = nodes.get(col_id)
                if node is not None:
                    self._column(node)
            self.out_names[id(scope)] = self._output_names(scope)
        self._restore(markers)
        for i, node in protected.items():
            if node.this != before[i]:  # pragma: no cover - guards the protect step
                raise AssertionError(f"protected identifier {before[i]!r} was changed")

    # ---- protect / restore -------------------------------------------------------------
    def _protect(self) -> list[tuple[str, str | None]]:
        from sqlglot import exp

        markers: list[tuple[str, str | None]] = []
        for lit in list(self.tree.find_all(exp.Literal)):
            if not lit.is_string:
                continue
            value = lit.this
            target: str | None = None
            ctx = comparison_column(lit, self.res)
            if ctx is not None and ctx[1] is not None:
                base = ctx[1]
                where = f"{base.table}.{base.column}"
                changed = self.m.changed_values(base.table, base.column)
                if _is_pattern(lit, value):
                    if changed:
                        self.flags.append(
                            Flag(
                                kind="pattern_literal",
                                detail=(f"pattern {value!r} on translated {where} left as written"),
                            )
                        )
                elif value in changed:
                    target = changed[value]
                    self.literals.append((value, target, where))
                elif changed and self.m.value_target(base.table, base.column, value) is None:
                    self.flags.append(
                        Flag(
                            kind="unmapped_literal",
                            detail=(f"{value!r} compared with {where} has no translation"),
                        )
                    )
            elif value in self.m.value_pairs() and self.m.value_pairs()[value] != value:
                self.flags.append(
                    Flag(
                        kind="literal_without_context",
                        detail=(
                            f"{value!r} is a translated value but is not compared with a column"
                        ),
                    )
                )
            markers.append((value, target))
            lit.replace(exp.Literal.string(_MARK.format(len(markers) - 1)))
        return markers

    def _restore(self, markers: list[tuple[str, str | None]]) -> None:
        from sqlglot import exp

        for lit in list(self.tree.find_all(exp.Literal)):
            m = _MARK_RE.match(lit.this) if lit.is_string else None
            if m is None:
                continue
            value, target = markers[int(m.group(1))]
            if target is not None:
                self.changed = True
            lit.replace(exp.Literal.string(value if target is None else target))

    def _protected_identifiers(self) -> dict[int, Any]:
        from sqlglot import exp

        out: dict[int, Any] = {}
        for node in self.tree.find_all(exp.TableAlias, exp.Alias):
            ident = node.args.get("alias") if isinstance(node, exp.Alias) else node.this
            if isinstance(ident, exp.Identifier):
                out[id(ident)] = ident
        return out

    # ---- replace ------------------------------------------------------------------------
    def _scope_tables(self, scope: Any) -> None:
        from sqlglot import exp

        for _key, (node, source) in scope.selected_sources.items():
            if not (isinstance(node, exp.Table) and isinstance(source, exp.Table)):
                continue
            real = self.res.tables.get(id(node))
            if real is None:
                continue
            target = self.m.table_target(real)
            if target.lower() != real.lower():
                node.set("this", identifier(target))
                self.tables[real] = target
                self.changed = True

    def _column(self, node: Any) -> None:
        ref = self.res.columns.get(id(node))
        if isinstance(ref, BaseRef):
            target = self.m.column_target(ref.table, ref.column)
            if target.lower() != ref.column.lower():
                node.set("this", identifier(target))
                self.columns[f"{ref.table}.{ref.column}"] = target
                self.changed = True
            if node.table and ref.by_table_name:
                ttarget = self.m.table_target(ref.table)
                if ttarget.lower() != ref.table.lower():
                    node.set("table", identifier(ttarget))
                    self.changed = True
        elif isinstance(ref, DerivedRef):
            target = self.out_names.get(ref.scope_id, {}).get(ref.name.lower(), ref.name)
            if target.lower() != node.name.lower():
                node.set("this", identifier(target))
                self.changed = True
        elif isinstance(ref, AliasRef):
            return

    def _output_names(self, scope: Any) -> dict[str, str]:
        from sqlglot import exp

        names: dict[str, str] = {}
        for out in self.res.outputs.get(id(scope), []):
            if out.star_from is not None:
                if out.base is not None and out.base.source == out.star_from:
                    tgt = self.m.column_target(out.base.table, out.base.column)
                    names[out.name.lower()] = out.name if tgt.lower() == out.name.lower() else tgt
                else:
                    names[out.name.lower()] = self._through(scope, out.star_from, out.name)
            elif isinstance(out.node, exp.Column):
                names[out.name.lower()] = out.node.name
            else:
                names[out.name.lower()] = out.name
        return names

    def _through(self, scope: Any, source: str, name: str) -> str:
        for key, (_node, src) in scope.selected_sources.items():
            if key == source:
                return self.out_names.get(id(src), {}).get(name.lower(), name)
        return name


def _column_type() -> Any:
    from sqlglot import exp

    return exp.Column


__all__ = ["BLOCKING_FLAGS", "Flag", "RewriteResult", "identifier", "rewrite_sql"]
