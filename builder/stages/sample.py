"""Stage 2, the task database: constraint-aware sampling (or another registered step).

The step returns the database's bytes (the ledger's ``task_db.sqlite``); the stage opens
one read-only connection over exactly those bytes and reads its tables once, so every
later stage works on what the ledger records.
"""

from __future__ import annotations

import dataclasses
import logging

from builder.errors import BuildError, SourceError
from builder.stages.state import OpenTaskDb, StageContext, TaskState

logger = logging.getLogger(__name__)


def sample(state: TaskState, ctx: StageContext) -> TaskState:
    """Make the task's own database and open it.

    Raises:
        BuildError: stage ``task_db`` (the source database cannot be read) or the
            sampler's own stage.
    """
    from builder.render.sqlite_renderer import deserialize
    from builder.sources.base import one_line
    from builder.tables import read_tables
    from builder.taskdb import get_task_db_step

    item = state.item
    try:
        database = get_task_db_step(ctx.task_db)(item, seed=state.seed)
    except SourceError as exc:
        raise BuildError(item.id, "task_db", one_line(str(exc))) from exc
    conn = deserialize(database.data, readonly=True)
    try:
        tables = read_tables(conn)
    except BaseException:
        conn.close()
        raise
    return dataclasses.replace(
        state, taskdb=OpenTaskDb(database=database, conn=conn, tables=tables)
    )


__all__ = ["sample"]
