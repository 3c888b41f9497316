"""The task's video (query-conditioned): every task tries to get one unless told not to.

A task's strategies are tried in an order the task seed rotates, and the first that fits
makes the video (the question is rewritten at the aligned span, and answer-evidence videos
withhold their source table from the workspace). A task whose strategies all decline keeps
its plain workspace, and each strategy's reason goes to the ledger as ``strategy: reason``.

``Stage3Options.video_share`` is the share of the release's tasks that hold a video: the
driver (``builder.driver``) builds every item trying for a video, then rebuilds a seeded
choice of the tasks that got one with ``TaskState.video_try`` off, until the share is met.
``Stage3Options.forced`` names items that must get a video with a given strategy. With
``TaskState.video_defer`` the chosen video is planned but not encoded (its encoding and
check are the driver's, for the videos the release keeps).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from builder.errors import BuildError
from builder.stages.state import StageContext, TaskState, need
from builder.tables import TableData

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
    if forced is None and (not state.video_try or opts.video_share <= 0.0):
        return state
    from builder.render.video import VideoRejected, build_video

    taskdb = need(state.taskdb, "task database", "video")
    answer = need(state.answer, "gold answer", "video")
    language = workspace_language(state.workspace_language, taskdb.tables)
    order = [forced] if forced else list(opts.strategies)
    if not forced and state.seed % 2:
        order.reverse()
    from builder.semantics import with_note, without_note

    # The strategies rewrite the question itself; its one note is put back after, with the
    # video's own clause (an answer-evidence table withheld) added to it.
    note_language = state.item.question_language
    base = without_note(state.item.question, state.note, note_language)
    skipped: list[str] = []
    for name in order:
        try:
            made = build_video(
                state.item.sql,
                answer,
                taskdb.conn,
                base,
                strategy=name,
                language=language,
                seed=state.seed,
                question_language=state.question_language or language,
                options=opts.video,
                encode=not state.video_defer,
            )
        except VideoRejected as exc:
            skipped.append(f"{name}: {str(exc).removeprefix(f'{name}: ')}")
            continue
        clauses = state.note + ((made.evidence.note,) if made.evidence.note else ())
        made = dataclasses.replace(made, question=with_note(made.question, clauses, note_language))
        return dataclasses.replace(state, video=made, video_wanted=True)
    if forced:
        raise BuildError(state.item.id, "video", skipped[-1] if skipped else "no strategy")
    return dataclasses.replace(state, video_wanted=True, video_skipped=tuple(skipped))


__all__ = ["video", "workspace_language"]
