"""The evaluation config, derived from the gold and checked by the evaluator itself.

The evaluator must accept the config and the gold, and every gold cell must fit its
column's rule (a gold cell that does not would be fatal at evaluation time).
"""

from __future__ import annotations

import dataclasses
import logging

from builder.errors import BuildError
from builder.stages.state import StageContext, TaskState, need

logger = logging.getLogger(__name__)


def config(state: TaskState, ctx: StageContext) -> TaskState:
    """Derive and check the evaluation config.

    Raises:
        BuildError: stage ``config``.
    """
    import evaluator
    from builder.evalconfig import derive_config
    from builder.sources.base import one_line

    answer = need(state.answer, "gold answer", "config")
    item = state.item
    try:
        cfg = derive_config(state.task_id, answer.header, answer.rows, item.sql)
        parsed = evaluator.parse_config(dict(cfg), source=f"{state.task_id}.json")
        table = evaluator.read_csv(answer.csv, role="gold", name="gold.csv")
        for spec in parsed.columns:
            for row in table.rows:
                evaluator.canonicalize(row[spec.gold_index], spec)
    except (ValueError, evaluator.FatalError, evaluator.CsvError) as exc:
        raise BuildError(item.id, "config", one_line(str(exc))) from None
    return dataclasses.replace(state, config=cfg)


__all__ = ["config"]
