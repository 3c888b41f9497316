"""Modality routing: every table of the task database to one or more renderers.

Routing looks only at table metadata (``builder.render.routing``), never at the question.
With stage 3 on, it routes over every modality with its policy; otherwise each table gets
one of the build's structured renderers.
"""

from __future__ import annotations

import dataclasses
import logging

from builder.render.routing import RoutingPolicy, route_tables, table_meta
from builder.stages.state import StageContext, TaskState, need

logger = logging.getLogger(__name__)


def routing_policy(ctx: StageContext) -> RoutingPolicy:
    """The policy a build routes with."""
    if ctx.stage3 is not None:
        return ctx.stage3.policy
    # Without stage 3 every table gets exactly one of the build's renderers.
    return RoutingPolicy(renderers=tuple(ctx.spec.renderers), extra_share=0.0, follow_share=0.0)


def route(state: TaskState, ctx: StageContext) -> TaskState:
    """Assign renderers to the task's tables.

    Raises:
        RoutingFailure: a table no renderer is compatible with (stage ``render``).
    """
    tables = need(state.taskdb, "task database", "route").tables
    routing = route_tables(
        [table_meta(t) for t in tables], seed=state.seed, policy=routing_policy(ctx)
    )
    return dataclasses.replace(state, routing=routing)


__all__ = ["route", "routing_policy"]
