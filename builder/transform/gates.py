"""Validation gates shared by the builder stages.

- ``nondeterminism``: SQL whose result depends on the wall clock or on randomness (an
  unpinned ``'now'``, ``current_date``, a date function called without arguments,
  ``random()``) cannot have a reproducible gold answer.
- ``execution_equivalent``: the translated query on the translated database returns the
  source result under the value map, multiplicity kept, order kept when the query orders.
- ``judge_gate``: the question–SQL judge, when a model is configured.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.dialect import DATE_FUNCTIONS, pin_now, tokenize
from builder.transform.mapping import ReplacementMap

logger = logging.getLogger(__name__)

_CLOCK_WORDS = frozenset({"current_date", "current_time", "current_timestamp"})
_RANDOM_FUNCS = frozenset({"random", "randomblob"})


def nondeterminism(sql: str) -> str | None:
    """Why ``sql`` is not reproducible, or None when it is.

    >>> nondeterminism("select date('now', '-1 day')")
    "depends on the current date: 'now' is not pinned"
    >>> nondeterminism("select * from t where d > current_date")
    'depends on the current date: current_date is not pinned'
    >>> nondeterminism("select date('2105-12-31', '-1 day')") is None
    True
    """
    if pin_now(sql, "\x00") != sql:
        return "depends on the current date: 'now' is not pinned"
    toks = [t for t in tokenize(sql) if t.kind not in ("ws", "comment")]
    for i, tok in enumerate(toks):
        if tok.kind != "word":
            continue
        low = tok.text.lower()
        prev = toks[i - 1].text if i else ""
        nxt = toks[i + 1].text if i + 1 < len(toks) else ""
        after = toks[i + 2].text if i + 2 < len(toks) else ""
        if prev == ".":
            continue
        if low in _CLOCK_WORDS:
            return f"depends on the current date: {low} is not pinned"
        if low in DATE_FUNCTIONS and nxt == "(" and after == ")":
            return f"depends on the current date: {low}() without arguments"
        if low in _RANDOM_FUNCS and nxt == "(":
            return f"depends on randomness: {low}()"
    return None


@dataclass(frozen=True, kw_only=True)
class Execution:
    """The result of running a query: column names and rows."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def execute(db: Path | sqlite3.Connection, sql: str) -> Execution:
    """Run ``sql`` read-only and return its columns and rows.

    Raises:
        sqlite3.Error: when the query fails.
    """
    own = not isinstance(db, sqlite3.Connection)
    conn = sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True) if own else db  # type: ignore[arg-type]
    try:
        cur = conn.execute(sql)  # type: ignore[union-attr]
        rows = tuple(tuple(r) for r in cur.fetchall())
        cols = tuple(d[0] for d in cur.description or ())
        return Execution(columns=cols, rows=rows)
    finally:
        if own:
            conn.close()  # type: ignore[union-attr]


@dataclass(frozen=True, kw_only=True)
class EquivalenceReport:
    """Outcome of the execution-equivalence gate."""

    ok: bool
    reason: str = ""
    source_rows: int = 0
    translated_rows: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "ok": self.ok,
            "reason": self.reason,
            "source_rows": self.source_rows,
            "translated_rows": self.translated_rows,
            "notes": list(self.notes),
        }


def translate_result(
    rows: Sequence[Sequence[Any]],
    mapping: ReplacementMap,
    provenance: Sequence[tuple[str, str] | None],
) -> list[tuple[Any, ...]]:
    """τ_M: apply the value map to a source result, column by column.

    A column whose provenance (base table, column) is known uses that column's value map;
    other columns use the values whose translation is the same in every cluster.
    """
    globals_ = mapping.value_pairs()
    per_col: list[Mapping[str, str]] = []
    for prov in provenance:
        per_col.append(mapping.column_values(*prov) if prov else globals_)
    out = []
    for row in rows:
        new = []
        for i, v in enumerate(row):
            m = per_col[i] if i < len(per_col) else globals_
            new.append(m.get(v, v) if isinstance(v, str) else v)
        out.append(tuple(new))
    return out


def execution_equivalent(
    source: Execution,
    translated: Execution,
    mapping: ReplacementMap,
    *,
    provenance: Sequence[tuple[str, str] | None],
    ordered: bool,
    order_keys_translated: bool = False,
) -> EquivalenceReport:
    """Compare Exec(Dc, σc) with τ_M(Exec(D0, σ0)).

    Multiplicity is kept (multiset comparison); when the query orders its result the row
    order must match too, except where the only difference is the order of rows whose
    ORDER BY keys are translated text (their collation legitimately changes).
    """
    expected = translate_result(source.rows, mapping, provenance)
    got = [tuple(r) for r in translated.rows]
    n_src, n_got = len(expected), len(got)
    if len(source.columns) != len(translated.columns):
        return EquivalenceReport(
            ok=False,
            reason=(f"{len(translated.columns)} columns instead of {len(source.columns)}"),
            source_rows=n_src,
            translated_rows=n_got,
        )
    if Counter(map(_canon, expected)) != Counter(map(_canon, got)):
        missing = Counter(map(_canon, expected)) - Counter(map(_canon, got))
        sample = next(iter(missing), None)
        return EquivalenceReport(
            ok=False,
            reason=(
                f"result differs from the translated source result ({n_got} rows instead of "
                f"{n_src}; e.g. {sample!r} is missing)"
            ),
            source_rows=n_src,
            translated_rows=n_got,
        )
    notes: list[str] = []
    if ordered and [_canon(r) for r in expected] != [_canon(r) for r in got]:
        if not order_keys_translated:
            return EquivalenceReport(
                ok=False,
                reason="row order differs from the source",
                source_rows=n_src,
                translated_rows=n_got,
            )
        notes.append("row order differs (ordering by translated text)")
    return EquivalenceReport(ok=True, source_rows=n_src, translated_rows=n_got, notes=tuple(notes))


def _canon(row: Sequence[Any]) -> tuple[Any, ...]:
    out = []
    for v in row:
        if isinstance(v, float):
            out.append(round(v, 9))
        else:
            out.append(v)
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class JudgeOutcome:
    """The question–SQL judge's decision (``status``: pass, repair, reject or skipped)."""

    status: str
    issues: tuple[Mapping[str, str], ...] = ()
    revised_question: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "status": self.status,
            "issues": [dict(i) for i in self.issues],
            "revised_question": self.revised_question,
            "reason": self.reason,
        }


__all__ = [
    "EquivalenceReport",
    "Execution",
    "JudgeOutcome",
    "execute",
    "execution_equivalent",
    "nondeterminism",
    "translate_result",
]
