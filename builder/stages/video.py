"""The task's video (query-conditioned): a seeded share of tasks try to get one.

A task draws a video with ``Stage3Options.video_share``; its strategies are tried in an
order the task seed rotates, and the first that fits makes the video (the question is
rewritten at the aligned span, and answer-evidence videos withhold their source table from
the workspace). A task whose strategies all decline keeps its plain workspace, and the
reasons go to the ledger. ``Stage3Options.forced`` names items that must get a video
with a given strategy.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Sequence

from builder.stages.state import StageContext, TaskState, need
from builder.tables import TableData
from dataspace.errors import BuildError

logger = logging.getLogger(__name__)


def workspace_language(value: str, tables: Sequence[TableData]) -> str:
    """The workspace's language: the task's own, else Chinese when a table's text is."""
    if value in ("en", "zh"):
        return value
    from builder.documents.assembly import detect_language

    return "zh" if any(detect_language(t) == "zh" for t in tables) else "en"


def video(state: TaskState, ctx: StageContext) -> TaskState:
    """Maybe make the task's video.

    Raises:
        BuildError: stage ``video``, only for an item whose video is forced.
    """
    opts = ctx.stage3
    if opts is None or opts.video is None:
        return state
    forced = opts.forced.get(state.source.id)
    if forced is None and not random.Random(f"stage3:{state.seed}").random() < opts.video_share:
        return state
    from builder.render.video import VideoRejected, build_video

    taskdb = need(state.taskdb, "task database", "video")
    answer = need(state.answer, "gold answer", "video")
    language = workspace_language(state.workspace_language, taskdb.tables)
    order = [forced] if forced else list(opts.strategies)
    if not forced and state.seed % 2:
        order.reverse()
    skipped: list[str] = []
    for name in order:
        try:
            made = build_video(
                state.item.sql,
                answer,
                taskdb.conn,
                state.item.question,
                strategy=name,
                language=language,
                seed=state.seed,
                question_language=state.question_language or language,
                options=opts.video,
            )
        except VideoRejected as exc:
            skipped.append(str(exc))
            continue
        return dataclasses.replace(state, video=made, video_wanted=True)
    if forced:
        raise BuildError(state.item.id, "video", skipped[-1] if skipped else "no strategy")
    return dataclasses.replace(state, video_wanted=True, video_skipped=tuple(skipped))


__all__ = ["video", "workspace_language"]
