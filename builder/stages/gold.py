"""The gold answer: execute the task's SQL on its own database, then state its semantics.

The gold is ``Exec(SQL, task database)``. The question then states what a solver cannot
guess (``builder.semantics``), in one note of clauses after the question: the fixed "now"
the SQL depends on, the tie rule of a rank-limited answer longer than N, and, for a seeded
share of multi-row answers whose SQL leaves the order open, a requested order (the SQL
gains an ORDER BY over its output and the gold is that SQL's result). The clauses stay on
the state (``TaskState.note``) so that a later rewrite keeps one note.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from builder.errors import BuildError
from builder.gold import GoldAnswer, GoldRejected, execute_gold
from builder.sources.base import one_line
from builder.stages.state import StageContext, TaskState, need

logger = logging.getLogger(__name__)


def gold(state: TaskState, ctx: StageContext) -> TaskState:
    """Execute the gold and state the task's semantics in its question.

    Raises:
        BuildError: stage ``gold`` (no usable answer) or ``semantics`` (ties past N when
            the options reject them).
    """
    item = state.item
    conn = need(state.taskdb, "task database", "gold").conn
    try:
        answer = execute_gold(conn, item.sql)
    except GoldRejected as exc:
        raise BuildError(item.id, "gold", one_line(exc.reason)) from None
    clauses, sql, answer, stated = _state_semantics(state, answer, conn, ctx)
    from builder.semantics import with_note

    question = with_note(item.question, clauses, item.question_language)
    return dataclasses.replace(
        state,
        item=dataclasses.replace(item, question=question, sql=sql),
        answer=answer,
        stated=stated,
        note=tuple(clauses),
    )


def _state_semantics(
    state: TaskState, answer: GoldAnswer, conn: Any, ctx: StageContext
) -> tuple[list[str], str, GoldAnswer, dict[str, Any]]:
    """The note's clauses, the SQL (ordered if an order is asked), its gold, the record."""
    from builder import semantics as sem
    from builder.sqlinfo import order_sensitive

    item = state.item
    opts = ctx.spec.semantics
    lang = item.question_language
    clauses: list[str] = []
    stated: dict[str, Any] = {}
    sql = item.sql
    stamp = sem.pinned_now(sql)
    if stamp and opts.state_now:
        clauses.append(sem.now_clause(stamp, lang))
        stated["now"] = stamp
    n = sem.rank_limit(sql)
    if n is not None:
        stated["rank_limit"] = n
        if opts.max_tie_factor is not None and len(answer.rows) > n * opts.max_tie_factor:
            raise BuildError(
                item.id,
                "semantics",
                f"a top-{n} question whose gold has {len(answer.rows)} rows (ties past "
                f"{opts.max_tie_factor:g} x N)",
            )
        if len(answer.rows) > n:
            if not opts.tie_rule:
                raise BuildError(
                    item.id,
                    "semantics",
                    f"a top-{n} question whose gold has {len(answer.rows)} rows",
                )
            clauses.append(sem.tie_clause(n, lang, dense=sem.dense_ranks(sql)))
            stated["tie_rule"] = "dense" if sem.dense_ranks(sql) else "rank"
    if (
        opts.order_share > 0
        and len(answer.rows) > 1
        and not order_sensitive(sql)
        and sem.draw(state.seed, "order") < opts.order_share
    ):
        clause = sem.order_clause([row[0] for row in answer.rows], lang)
        if clause is not None:
            ordered = sem.ordered_sql(sql, len(answer.header))
            try:
                answer = execute_gold(conn, ordered)
            except GoldRejected as exc:
                raise BuildError(item.id, "semantics", one_line(exc.reason)) from None
            sql = ordered
            clauses.append(clause)
            stated["order"] = sem.value_kind([row[0] for row in answer.rows])
    return clauses, sql, answer, stated


__all__ = ["gold"]
