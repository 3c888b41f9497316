"""Rendering: the routed tables as workspace files, each round-trip checked.

A table whose rendering does not read back falls back along its compatible renderers; one
that no renderer represents rejects the task. Tables an answer-evidence video carries are
withheld. Documents are written in the workspace's language and the item's domain.
"""

from __future__ import annotations

import dataclasses
import logging

from builder.documents.assembly import DocumentOptions
from builder.render.routing import render_routed
from builder.stages.state import StageContext, TaskState, need
from builder.stages.video import workspace_language

logger = logging.getLogger(__name__)


def render(state: TaskState, ctx: StageContext) -> TaskState:
    """Render the routing into the task's workspace.

    Raises:
        RoutingFailure: a table no renderer could represent (stage ``render``).
    """
    taskdb = need(state.taskdb, "task database", "render")
    routing = need(state.routing, "routing", "render")
    item = state.item
    documents = DocumentOptions()
    if ctx.stage3 is not None:
        documents = dataclasses.replace(
            ctx.stage3.documents,
            language=workspace_language(state.workspace_language, taskdb.tables),
            domain=domain_of(state) or ctx.stage3.documents.domain,
        )
    ws = render_routed(
        taskdb.tables,
        routing,
        database_name=item.db_id or "database",
        documents=documents,
        withhold=state.video.withheld if state.video is not None else (),
    )
    return dataclasses.replace(state, workspace=ws)


def domain_of(state: TaskState) -> str:
    """The item's domain (its corpus when the source names none)."""
    return str(state.item.extra.get("domain") or state.item.corpus)


__all__ = ["domain_of", "render"]
