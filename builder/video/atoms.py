"""Evidence atoms from the SQL AST and the gold answer.

A predicate atom is a comparison between one column and one literal (``=``, ``!=``, ``<``,
``<=``, ``>``, ``>=``) or a year window (``strftime('%Y', col) = '2104'``), resolved to its
table through the query's scopes, with the literal's typed value, its aligned span in the
question and its display text. Null tests, join keys (column = column), grouping and
aggregates, pattern matches, literals inside other functions (relative-time arithmetic) and
projection-only fields never become atoms. An answer atom is one cell of the gold answer
(row, field, value, display text).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from builder.documents.values import decimal_text

logger = logging.getLogger(__name__)

OPERATORS = {"EQ": "=", "NEQ": "!=", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<="}
FLIP = {"=": "=", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def display(value: Any) -> str:
    """The exact text a value is shown as (numbers keep their precision).

    >>> display(0.05), display(15000000), display("600180"), display(None)
    ('0.05', '15000000', '600180', 'NULL')
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | float):
        return decimal_text(value)
    return str(value)


@dataclass(frozen=True, kw_only=True)
class PredicateAtom:
    """A filter condition that can move from the question into a video scene.

    Attributes:
        atom_id: ``P1``, ``P2`` ...
        table: the source table.
        column: the column.
        operator: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` or ``year`` (a year window).
        value: the typed literal.
        literal: the literal as written in the SQL.
        span: (start, end) of the literal in the question, or None when it is not there.
        display: the exact text shown in the video.
    """

    atom_id: str
    table: str
    column: str
    operator: str
    value: Any
    literal: str
    span: tuple[int, int] | None
    display: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "atom_id": self.atom_id,
            "kind": "predicate",
            "table": self.table,
            "column": self.column,
            "operator": self.operator,
            "value": self.value,
            "literal": self.literal,
            "span": list(self.span) if self.span else None,
            "display": self.display,
        }


@dataclass(frozen=True, kw_only=True)
class AnswerAtom:
    """One cell of the gold answer."""

    atom_id: str
    row: int
    field: str
    value: Any
    display: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "atom_id": self.atom_id,
            "kind": "answer",
            "row": self.row,
            "field": self.field,
            "value": self.value,
            "display": self.display,
        }


@dataclass(frozen=True, kw_only=True)
class AtomSet:
    """Every atom of one task."""

    predicates: tuple[PredicateAtom, ...]
    answers: tuple[AnswerAtom, ...]


def _literal(node: Any) -> tuple[Any, str] | None:
    from sqlglot import exp

    neg = False
    if isinstance(node, exp.Neg):
        neg, node = True, node.this
    if not isinstance(node, exp.Literal):
        return None
    text = node.this
    if node.is_string:
        return (None, text) if neg else (text, text)
    try:
        value: Any = int(text) if re.fullmatch(r"\d+", text) else float(text)
    except ValueError:
        return None
    return (-value if neg else value), ("-" if neg else "") + text


def _year_column(node: Any) -> Any:
    """The column of ``strftime('%Y', col)``, else None."""
    from sqlglot import exp

    if isinstance(node, exp.TimeToStr):
        fmt = node.args.get("format")
        inner = node.this
        while isinstance(inner, exp.TsOrDsToTimestamp | exp.TsOrDsToDate | exp.Cast):
            inner = inner.this
        if isinstance(fmt, exp.Literal) and fmt.this == "%Y" and isinstance(inner, exp.Column):
            return inner
    if isinstance(node, exp.Anonymous) and str(node.name).lower() == "strftime":
        args = node.expressions
        if (
            len(args) == 2
            and isinstance(args[0], exp.Literal)
            and args[0].this == "%Y"
            and isinstance(args[1], exp.Column)
        ):
            return args[1]
    return None


def _resolve(column: Any, schema: Mapping[str, Sequence[str]]) -> str | None:
    """The base table of a column through its scope (aliases, subqueries), else None."""
    from sqlglot import exp

    select = column.find_ancestor(exp.Select)
    if select is None:
        return None
    sources: dict[str, str] = {}
    for tbl in [
        select.args.get("from_") or select.args.get("from"),
        *(select.args.get("joins") or []),
    ]:
        if tbl is None:
            continue
        for t in tbl.find_all(exp.Table):
            if t.find_ancestor(exp.Select) is not select:
                continue
            sources[(t.alias_or_name or t.name).lower()] = t.name
    lower = {k.lower(): k for k in schema}
    qualifier = (column.table or "").lower()
    if qualifier:
        name = sources.get(qualifier)
        return lower.get(name.lower()) if name else None
    hits = [
        lower[n.lower()]
        for n in set(sources.values())
        if n.lower() in lower
        and column.name.lower() in {c.lower() for c in schema[lower[n.lower()]]}
    ]
    return hits[0] if len(hits) == 1 else None


def _column_name(table: str, column: str, schema: Mapping[str, Sequence[str]]) -> str:
    for c in schema[table]:
        if c.lower() == column.lower():
            return c
    return column


def question_span(question: str, literal: str, value: Any) -> tuple[int, int] | None:
    """Where a literal is stated in the question (once, as a whole token), else None.

    >>> question_span("Which drugs did patient 30377 take?", "30377", 30377)
    (24, 29)
    >>> question_span("How should Naproxen be taken?", "naproxen", "naproxen")
    (11, 19)
    >>> question_span("Age 60 or 60?", "60", 60) is None
    True
    """
    forms = {literal}
    if isinstance(value, int | float) and not isinstance(value, bool):
        forms.add(display(value))
        if isinstance(value, int) and abs(value) >= 1000:
            forms.add(f"{value:,}")
    found: list[tuple[int, int]] = []
    low = question.lower()
    for form in forms:
        if not form.strip():
            continue
        pat = re.compile(r"(?<![0-9A-Za-z_.])" + re.escape(form.lower()) + r"(?![0-9A-Za-z_]|\.\d)")
        found += [m.span() for m in pat.finditer(low)]
    found = sorted(set(found))
    return found[0] if len(found) == 1 else None


def extract_atoms(
    sql: str,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    question: str,
    *,
    schema: Mapping[str, Sequence[str]],
) -> AtomSet:
    """Predicate atoms from the SQL's comparisons and answer atoms from the gold.

    Args:
        sql: the task SQL (SQLite dialect).
        header: the gold header.
        rows: the gold rows.
        question: the task question.
        schema: table -> column names of the task database.
    """
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="sqlite")
    atoms: list[PredicateAtom] = []
    literal_count: dict[str, int] = {}
    for lit_node in tree.find_all(exp.Literal):
        literal_count[lit_node.this.lower()] = literal_count.get(lit_node.this.lower(), 0) + 1
    for node in tree.walk():
        kind = type(node).__name__
        if kind not in ("EQ", "NEQ", "GT", "GTE", "LT", "LTE"):
            continue
        assert isinstance(node, exp.Binary)  # every comparison above is a Binary
        if node.find_ancestor(exp.Join) is not None or node.find_ancestor(exp.Having):
            continue
        op = OPERATORS[kind]
        left, right = node.left, node.right
        lit = _literal(right)
        if lit is None:
            lit = _literal(left)
            left, op = right, FLIP[op]
        if lit is None or lit[0] is None:
            continue
        value, text = lit
        column = left if isinstance(left, exp.Column) else None
        operator = op
        if column is None:
            column = _year_column(left)
            if column is None or op != "=":
                continue
            operator = "year"
        if column.find_ancestor(exp.AggFunc) is not None:
            continue
        table = _resolve(column, schema)
        if table is None:
            continue
        if literal_count.get(text.lower(), 0) != 1:
            continue
        span = question_span(question, text, value)
        atoms.append(
            PredicateAtom(
                atom_id=f"P{len(atoms) + 1}",
                table=table,
                column=_column_name(table, column.name, schema),
                operator=operator,
                value=value,
                literal=text,
                span=span,
                display=display(value),
            )
        )
    answers = tuple(
        AnswerAtom(
            atom_id=f"A{len(header) * r + c + 1}",
            row=r,
            field=str(h),
            value=row[c],
            display=display(row[c]),
        )
        for r, row in enumerate(rows)
        for c, h in enumerate(header)
    )
    return AtomSet(predicates=tuple(atoms), answers=answers)


__all__ = ["AnswerAtom", "AtomSet", "PredicateAtom", "display", "extract_atoms", "question_span"]
