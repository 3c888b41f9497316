"""The typed state a task carries through the stages, and the build's resolved context.

Every stage is a function ``(TaskState, StageContext) -> TaskState``. A stage reads what
earlier stages left on the state and returns a new state with its own results added; it
never recomputes an earlier stage's result (the task database is opened once, the gold is
executed once, the workspace is rendered once). The open task database connection lives on
the state for the item's lifetime and is closed by the driver.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from builder.errors import Rejected
from builder.sources.base import SourceItem

if TYPE_CHECKING:
    from builder.gold import GoldAnswer
    from builder.render.routing import RoutedWorkspace, Routing
    from builder.render.video import VideoArtifacts
    from builder.spec import BuildSpec, Stage3Options
    from builder.tables import TableData
    from builder.taskdb import TaskDatabase
    from dataspace.release import TaskArtifacts

logger = logging.getLogger(__name__)

PROVISIONAL_TASK_ID = "task_0"
"""The task id a task is built under; the release writer's order gives the final one."""

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class StageContext:
    """What every stage may read about the build (resolved once per build and process).

    Attributes:
        spec: the build spec.
        stage3: typed stage-3 options (None: structured renderers, no documents or videos).
        task_db: the registered task database step to use.
        translator: the stage-1 translator.
        cache_root: the build cache (translated databases are shared under it).
    """

    spec: BuildSpec
    stage3: Stage3Options | None
    task_db: str
    translator: Any
    cache_root: Path | None = None


@dataclass(frozen=True, kw_only=True)
class OpenTaskDb:
    """The task's own database: its bytes (the ledger's file), one open connection, its tables."""

    database: TaskDatabase
    conn: sqlite3.Connection
    tables: list[TableData]


@dataclass(frozen=True, kw_only=True)
class TaskState:
    """One item on its way to a task.

    Attributes:
        source: the item as loaded.
        item: the item as the stages have made it so far (translated question, SQL and
            database; the question then gains stated semantics).
        task_id: the task id it is built under.
        build_seed: the build seed.
        seed: the task's own seed (from the build seed and the item's identity).
        languages: ``(database, question)`` languages chosen for the task.
        transform: stage 1's ledger record.
        taskdb: the task database (stage 2).
        answer: the gold answer of ``item.sql`` on the task database.
        stated: the semantics stated in the question (now, tie rule, order).
        note: the clauses of the question's one note (``builder.semantics.note``).
        routing: the renderer assignment.
        video: the video, when one was made.
        video_try: whether this task tries to get a video (the driver turns it off for the
            tasks it drops to reach ``Stage3Options.video_share``).
        video_defer: leave the video planned, not encoded (``VideoArtifacts.pending``):
            the driver encodes only the videos its release keeps.
        video_wanted: whether this task tried to get a video.
        video_skipped: why each tried video strategy did not fit.
        workspace: the rendered workspace.
        config: the evaluation config.
        artifacts: the finished task.
        timings: seconds per stage and sub-step (for the build report, never the ledger).
        cpu: CPU seconds per stage, child processes included (for the build report).
    """

    source: SourceItem
    item: SourceItem
    task_id: str = PROVISIONAL_TASK_ID
    build_seed: int = 0
    seed: int = 0
    languages: tuple[str, str] = ("en", "en")
    transform: Mapping[str, Any] | None = None
    taskdb: OpenTaskDb | None = None
    answer: GoldAnswer | None = None
    stated: Mapping[str, Any] = field(default_factory=dict)
    note: tuple[str, ...] = ()
    routing: Routing | None = None
    video: VideoArtifacts | None = None
    video_try: bool = True
    video_defer: bool = False
    video_wanted: bool = False
    video_skipped: tuple[str, ...] = ()
    workspace: RoutedWorkspace | None = None
    config: Mapping[str, Any] | None = None
    artifacts: TaskArtifacts | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    cpu: Mapping[str, float] = field(default_factory=dict)

    @property
    def workspace_language(self) -> str:
        """The workspace's language (the database's)."""
        return self.languages[0]

    @property
    def question_language(self) -> str:
        """The question's language."""
        return self.languages[1]

    def close(self) -> None:
        """Close the task database connection (idempotent)."""
        if self.taskdb is not None:
            self.taskdb.conn.close()


def need(value: T | None, what: str, stage: str) -> T:
    """``value``, or a clear error when the stage that makes it has not run.

    >>> need(3, "answer", "config")
    3
    """
    if value is None:
        raise RuntimeError(f"stage {stage!r} needs the {what}, which no earlier stage made")
    return value


def task_seed(seed: int, item: SourceItem) -> int:
    """A per-task seed from the build seed and the item's identity (order-independent).

    >>> task_seed(0, SourceItem(corpus="c", id="1", question="q", sql="select 1",
    ...     db_path=Path("x"), db_id="x", question_language="en", db_language="en"))
    3572910493
    """
    digest = hashlib.sha256(f"{seed}\0{item.corpus}\0{item.id}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def initial_state(
    item: SourceItem,
    *,
    languages: tuple[str, str],
    build_seed: int,
    task_id: str = "",
    video: bool = True,
    defer_video: bool = False,
) -> TaskState:
    """The state an item enters the first stage with.

    ``video``: try to get a video; ``defer_video``: plan it without encoding it.
    """
    return TaskState(
        source=item,
        item=item,
        task_id=task_id or PROVISIONAL_TASK_ID,
        build_seed=build_seed,
        seed=task_seed(build_seed, item),
        languages=languages,
        video_try=video,
        video_defer=defer_video,
    )


__all__ = [
    "PROVISIONAL_TASK_ID",
    "OpenTaskDb",
    "Rejected",
    "StageContext",
    "TaskState",
    "initial_state",
    "need",
    "task_seed",
]
