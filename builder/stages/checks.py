"""The last gate: the finished task as a careful solver would read it.

After every rewrite (stated semantics, the video's question integration) the question must
still read as its language and leak no internal placeholder, still state the fixed "now"
its SQL depends on and the tie rule of a top-N answer longer than N; and every table the
SQL reads must be in the workspace or carried by the video.
"""

from __future__ import annotations

import logging

from builder.errors import BuildError
from builder.stages.state import StageContext, TaskState, need

logger = logging.getLogger(__name__)


def problems(state: TaskState, ctx: StageContext) -> list[str]:
    """Why the finished task is not acceptable (empty when it is)."""
    from builder import semantics as sem
    from builder.sqlinfo import tables_read
    from builder.transform.question import GlossaryEntry, fluency_problems, protected_terms

    art = need(state.artifacts, "task", "checks")
    answer = need(state.answer, "gold answer", "checks")
    item, question, lang = state.item, art.question, state.question_language
    out: list[str] = []
    if not question.strip():
        out.append("the question is empty")
    focused = [
        GlossaryEntry(**e)
        for e in ((state.transform or {}).get("question") or {}).get("focused_glossary", [])
    ]
    out += fluency_problems(
        question, lang, protected_terms(focused, f"{state.source.sql} {item.sql}")
    )
    opts = ctx.spec.semantics
    stamp = sem.pinned_now(item.sql)
    if stamp and opts.state_now and not sem.states(question, sem.now_clause(stamp, lang)):
        out.append(f"the question does not state the fixed now {stamp}")
    n = sem.rank_limit(item.sql)
    tie = sem.tie_clause(n, lang, dense=sem.dense_ranks(item.sql)) if n is not None else ""
    if n is not None and len(answer.rows) > n and not sem.states(question, tie):
        out.append(f"a top-{n} question with {len(answer.rows)} rows does not state the tie rule")
    carried = {t.lower() for t in art.metadata.get("tables_required", [])}
    carried |= {t.lower() for t in art.metadata.get("tables_withheld", [])}
    present = {t.name.lower() for t in need(state.taskdb, "task database", "checks").tables}
    missing = sorted(t for t in tables_read(item.sql) if t.lower() in present - carried)
    if missing:
        out.append(f"tables the SQL reads are not in the workspace: {', '.join(missing)}")
    return out


def checks(state: TaskState, ctx: StageContext) -> TaskState:
    """Reject a finished task that fails a check.

    Raises:
        BuildError: stage ``checks`` with every failed check.
    """
    found = problems(state, ctx)
    if found:
        raise BuildError(state.item.id, "checks", "; ".join(found))
    return state


__all__ = ["checks", "problems"]
