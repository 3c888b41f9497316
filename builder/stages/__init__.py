"""The builder's stages: one small module per stage, composed by one tuple.

Each stage is a function ``(TaskState, StageContext) -> TaskState`` (``builder.stages.state``)
that adds its own result to the state; ``run_stages`` folds the item's state through
``STAGES`` in order, timing each, and always closes the task database it opened::

    translate  stage 1: the item in its task's languages (fluency gate)
    sample     stage 2: the task's own database (constraint-aware sampling)
    gold       Exec(SQL, task database); the question states now, ties, order
    route      stage 3: every table to renderers, from table metadata only
    video      a seeded share of tasks get a query-conditioned video
    render     the routed tables as round-trip-checked workspace files
    config     the evaluation config, checked by the evaluator
    ledger     metadata, ledger and the finished task (timings leave the ledger)
    checks     the finished task as a careful solver reads it

A stage rejects its item by raising ``BuildError`` (or a ``Rejected`` subclass) with its
stage name and a one-line reason.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from builder.stages.checks import checks
from builder.stages.config import config
from builder.stages.gold import gold
from builder.stages.ledger import LEDGER_SCHEMA_VERSION, ledger
from builder.stages.render import render
from builder.stages.route import route
from builder.stages.sample import sample
from builder.stages.state import (
    PROVISIONAL_TASK_ID,
    StageContext,
    TaskState,
    initial_state,
    task_seed,
)
from builder.stages.translate import translate
from builder.stages.video import video

Stage = Callable[[TaskState, StageContext], TaskState]

STAGES: tuple[Stage, ...] = (
    translate,
    sample,
    gold,
    route,
    video,
    render,
    config,
    ledger,
    checks,
)
"""Every stage, in the order an item goes through them."""


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and its finished child processes (ffmpeg)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def run_stages(state: TaskState, ctx: StageContext, stages: Sequence[Stage] = STAGES) -> TaskState:
    """Fold ``state`` through ``stages``, timing each; the task database is closed after.

    Each stage's wall seconds go to ``state.timings`` and its CPU seconds to ``state.cpu``.

    Raises:
        BuildError: a stage rejected the item (the item id is attached when the stage
            did not know it).
    """
    from builder.errors import BuildError

    try:
        for stage in stages:
            started, cpu = time.perf_counter(), cpu_seconds()
            try:
                state = stage(state, ctx)
            except BuildError as exc:
                if not exc.item:
                    raise BuildError(state.item.id, exc.stage, exc.reason) from exc
                raise
            finally:
                spent, used = time.perf_counter() - started, cpu_seconds() - cpu
                name = stage.__name__
                state = dataclasses.replace(
                    state,
                    timings={**state.timings, name: state.timings.get(name, 0.0) + spent},
                    cpu={**state.cpu, name: state.cpu.get(name, 0.0) + used},
                )
    finally:
        state.close()
    return state


__all__ = [
    "LEDGER_SCHEMA_VERSION",
    "PROVISIONAL_TASK_ID",
    "STAGES",
    "Stage",
    "StageContext",
    "TaskState",
    "checks",
    "config",
    "cpu_seconds",
    "gold",
    "initial_state",
    "ledger",
    "render",
    "route",
    "run_stages",
    "sample",
    "task_seed",
    "translate",
    "video",
]
