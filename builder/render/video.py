"""Query-conditioned data videos: atoms → strategy → storyboard → frames + narration → MP4.

``build_video`` is the whole video branch for one task. It extracts typed evidence atoms
from the SQL AST and the gold, applies a strategy (predicate abstraction: a condition moves
from the question into the video; answer evidence: the answer-bearing rows are shown and
their table is withheld), plans a storyboard, draws every scene with Pillow, synthesizes
narration (espeak-ng, or a silent track with a warning), sets each scene's duration from its
narration, encodes with the imageio-ffmpeg binary and checks the result: it decodes, has an
audio track and the planned duration, its frames are readable, every atom's exact constant
is read back from the frames, and the rewritten question no longer states moved evidence.
Failures raise ``VideoRejected`` with a one-line reason.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from builder.errors import Rejected
from builder.video.atoms import AtomSet, extract_atoms
from builder.video.frames import TextItem
from builder.video.storyboard import (
    Storyboard,
    StoryboardPlanner,
    StoryboardRejected,
    get_planner,
)
from builder.video.strategies import (
    STRATEGIES,
    EvidencePlan,
    StrategyRejected,
    answer_evidence,
    leaks,
    predicate_abstraction,
)

logger = logging.getLogger(__name__)

VIDEO_FILE = "briefing.mp4"


class VideoRejected(Rejected, ValueError):
    """No valid video for this task; carries a one-line reason."""

    stage_name = "video"


@dataclass(frozen=True, kw_only=True)
class VideoOptions:
    """How videos are made.

    Attributes:
        width, height, fps: frame size and rate (all frames RGB24 of this size).
        scene_seconds: the base planned length of a scene.
        target_seconds: stretch the scenes to about this total (0: as planned). The
            default is the paper's median video length (103.8 s, Table 2).
        target_spread: each video's target is drawn (seeded per task) from
            ``target_seconds × [1 - spread, 1 + spread]`` (the paper's videos span
            39.1–158.3 s).
        fade_seconds: the fade-in at the start of each scene.
        narration: synthesize speech (else a silent track).
        planner: ``deterministic`` or ``llm``.
        planner_options: options of the planner factory.
        filename: the workspace file name.
    """

    width: int = 640
    height: int = 360
    fps: int = 8
    scene_seconds: float = 2.0
    target_seconds: float = 104.0
    target_spread: float = 0.5
    fade_seconds: float = 0.25
    narration: bool = True
    planner: str = "deterministic"
    planner_options: dict[str, Any] = field(default_factory=dict)
    filename: str = VIDEO_FILE


@dataclass(frozen=True, kw_only=True)
class PendingVideo:
    """A planned video before encoding: everything the encoder and the check read.

    Attributes:
        frames: the distinct RGB24 frames.
        order: the index into ``frames`` of every frame of the video, in order.
        wav: the narration track.
        width, height, fps: frame size and rate.
        seconds: the video's length.
        timeline: (start, end) seconds of each scene.
        layouts: each scene's text layout.
        expected: atom id -> the display text the check must read back.
    """

    frames: tuple[bytes, ...]
    order: tuple[int, ...]
    wav: bytes
    width: int
    height: int
    fps: int
    seconds: float
    timeline: tuple[tuple[float, float], ...]
    layouts: tuple[tuple[TextItem, ...], ...]
    expected: dict[str, str]


@dataclass(frozen=True, kw_only=True)
class EncodedVideo:
    """A pending video encoded and checked."""

    video: bytes
    check: Any
    seconds: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class VideoArtifacts:
    """A task's video and how it changes the task.

    Attributes:
        video: the MP4 bytes.
        filename: its workspace path.
        question: the question after integration (rewritten for predicate abstraction,
            pointed at the video for answer evidence).
        strategy: the strategy used.
        evidence: the evidence plan (atoms, records, withheld tables).
        storyboard: the storyboard with final durations.
        layouts: each scene's text layout (positions of every text).
        timeline: (start, end) seconds of each scene.
        check: the video check verdict.
        narration_engine: ``espeak-ng`` or ``silent``.
        warnings: ledger warnings (a silent track ...).
        seconds: wall seconds per step.
        pending: while the video is planned but not yet encoded (``build_video`` with
            ``encode=False``): what ``encode_pending`` needs; ``video`` is then empty and
            ``check`` None.
    """

    video: bytes
    filename: str
    question: str
    strategy: str
    evidence: EvidencePlan
    storyboard: Storyboard
    layouts: tuple[tuple[TextItem, ...], ...]
    timeline: tuple[tuple[float, float], ...]
    check: Any
    narration_engine: str
    warnings: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)
    pending: PendingVideo | None = None

    @property
    def withheld(self) -> tuple[str, ...]:
        """Tables left out of the workspace."""
        return self.evidence.withheld

    @property
    def duration(self) -> float:
        """Seconds of video."""
        return self.timeline[-1][1] if self.timeline else 0.0

    def ledger(self) -> dict[str, Any]:
        """What the ledger records about the video."""
        return {
            "file": self.filename,
            "strategy": self.strategy,
            "question": self.question,
            "evidence": self.evidence.to_json(),
            "storyboard": self.storyboard.to_json(),
            "timeline": [[round(a, 3), round(b, 3)] for a, b in self.timeline],
            "layouts": [[i.to_json() for i in layout] for layout in self.layouts],
            "check": self.check.to_json() if self.check is not None else None,
            "narration": self.narration_engine,
            "warnings": list(self.warnings),
            "duration": round(self.duration, 3),
            "bytes": len(self.video),
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }


def schema_of(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """Table -> column names of a database."""
    from builder.tables import quote_ident, table_names

    return {
        t: tuple(r[1] for r in conn.execute(f"pragma table_info({quote_ident(t)})"))
        for t in table_names(conn)
    }


def plan_evidence(
    atoms: AtomSet,
    strategy: str,
    *,
    sql: str,
    question: str,
    conn: sqlite3.Connection,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    language: str,
    seed: int,
    question_language: str | None = None,
) -> EvidencePlan:
    """Apply one strategy.

    Raises:
        StrategyRejected: the task does not fit it.
    """
    from builder.sqlinfo import order_sensitive

    if strategy == "predicate_abstraction":
        return predicate_abstraction(
            atoms,
            question=question,
            conn=conn,
            language=language,
            seed=seed,
            question_language=question_language,
        )
    if strategy == "answer_evidence":
        return answer_evidence(
            atoms,
            sql=sql,
            question=question,
            conn=conn,
            header=header,
            rows=rows,
            ordered=order_sensitive(sql),
            schema=schema_of(conn),
            language=language,
            seed=seed,
            question_language=question_language,
        )
    raise ValueError(f"unknown video strategy {strategy!r}; known: {list(STRATEGIES)}")


def _frames(
    images: Sequence[Any],
    timeline: Sequence[tuple[float, float]],
    *,
    fps: int,
    fade: float,
    background: tuple[int, int, int],
) -> Any:
    from PIL import Image

    for img, (start, end) in zip(images, timeline, strict=True):
        n = round(end * fps) - round(start * fps)
        raw = img.tobytes()
        fades = min(n, round(fade * fps))
        base = Image.new("RGB", img.size, background)
        for i in range(fades):
            yield Image.blend(base, img, (i + 1) / (fades + 1)).tobytes()
        for _ in range(n - fades):
            yield raw


def build_video(
    sql: str,
    gold: Any,
    task_db: sqlite3.Connection,
    question: str,
    *,
    strategy: str,
    planner: StoryboardPlanner | str | None = None,
    language: str = "en",
    seed: int = 0,
    options: VideoOptions | None = None,
    question_language: str | None = None,
    encode: bool = True,
) -> VideoArtifacts:
    """Make a task's video and integrate it into the task.

    Args:
        sql: the task SQL.
        gold: the gold answer (``header`` and typed ``rows``).
        task_db: a connection to the task database.
        question: the task question.
        strategy: ``predicate_abstraction`` or ``answer_evidence``.
        planner: a storyboard planner or its name (default: ``options.planner``).
        language: the video's language (``en`` or ``zh``): the workspace's.
        seed: variation seed.
        question_language: the question's language (slots and notes are written in it;
            default: ``language``).
        options: sizes, timing, narration.
        encode: encode and check the video now; else it is returned planned (its
            ``pending``), for ``encode_pending`` later.

    Raises:
        VideoRejected: the strategy does not fit, no valid storyboard, or (when encoding)
            encoding or a check failed.
    """
    from builder.video.encoding import distinct_frames
    from builder.video.frames import BG, draw_scene
    from builder.video.narration import Clip, Narration, synthesize, track

    opts = options or VideoOptions()
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    header, rows = tuple(gold.header), list(gold.rows)
    atoms = extract_atoms(sql, header, rows, question, schema=schema_of(task_db))
    try:
        evidence = plan_evidence(
            atoms,
            strategy,
            sql=sql,
            question=question,
            conn=task_db,
            header=header,
            rows=rows,
            language=language,
            seed=seed,
            question_language=question_language,
        )
    except StrategyRejected as exc:
        raise VideoRejected(f"{strategy}: {exc}") from None
    for atom in evidence.atoms:
        if leaks(evidence.question, atom) and strategy == "predicate_abstraction":
            raise VideoRejected(f"{strategy}: the question still states {atom.display!r}")
    if isinstance(planner, str) or planner is None:
        planner = get_planner(planner or opts.planner, **opts.planner_options)
    try:
        board = planner.plan(evidence, scene_seconds=opts.scene_seconds)
    except StoryboardRejected as exc:
        raise VideoRejected(f"storyboard: {exc}") from None
    seconds["plan"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    if opts.target_seconds > 0 and board.duration > 0:
        u = random.Random(f"video-length:{seed}").random()
        target = opts.target_seconds * (1 + opts.target_spread * (2 * u - 1))
        scale = target / board.duration
    else:
        scale = 1.0
    canvases = []
    for scene in board.scenes:
        try:
            canvases.append(
                draw_scene(scene.component, scene.narration, width=opts.width, height=opts.height)
            )
        except ValueError as exc:
            raise VideoRejected(f"scene {scene.scene_id}: {exc}") from None
    seconds["frames"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    texts = [s.narration for s in board.scenes]
    narration = (
        synthesize(texts, language)
        if opts.narration
        else Narration(
            clips=tuple(Clip(pcm=b"") for _ in texts),
            engine="silent",
            warning="narration disabled; the video has a silent audio track",
        )
    )
    seconds["narration"] = time.perf_counter() - t2
    timeline: list[tuple[float, float]] = []
    start = 0.0
    for scene, clip in zip(board.scenes, narration.clips, strict=True):
        planned = scene.duration * scale
        length = max(planned, clip.seconds + 0.4)
        length = round(length * opts.fps) / opts.fps
        timeline.append((start, start + length))
        start += length
    t3 = time.perf_counter()
    wav = track(narration.clips, [b - a for a, b in timeline])
    distinct, order = distinct_frames(
        _frames(
            [c.image for c in canvases],
            timeline,
            fps=opts.fps,
            fade=opts.fade_seconds,
            background=BG,
        )
    )
    layouts = tuple(tuple(c.items) for c in canvases)
    pending = PendingVideo(
        frames=distinct,
        order=order,
        wav=wav,
        width=opts.width,
        height=opts.height,
        fps=opts.fps,
        seconds=start,
        timeline=tuple(timeline),
        layouts=layouts,
        expected={a.atom_id: a.display for a in evidence.atoms},
    )
    seconds["frames"] += time.perf_counter() - t3
    warnings = tuple(w for w in (narration.warning,) if w)
    for w in warnings:
        logger.info("video: %s", w)
    final = Storyboard(
        title=board.title,
        language=board.language,
        strategy=board.strategy,
        scenes=tuple(
            _with_duration(s, b - a) for s, (a, b) in zip(board.scenes, timeline, strict=True)
        ),
        planner=board.planner,
        attempts=board.attempts,
        rejected=board.rejected,
    )
    made = VideoArtifacts(
        video=b"",
        filename=opts.filename,
        question=evidence.question,
        strategy=strategy,
        evidence=evidence,
        storyboard=final,
        layouts=layouts,
        timeline=tuple(timeline),
        check=None,
        narration_engine=narration.engine,
        warnings=warnings,
        seconds=seconds,
        pending=pending,
    )
    return with_encoding(made, encode_pending(pending)) if encode else made


def encode_pending(pending: PendingVideo) -> EncodedVideo:
    """Encode a planned video and check the result.

    Raises:
        VideoRejected: encoding failed or a check failed.
    """
    from builder.errors import EncodingError
    from builder.video.checks import check_video
    from builder.video.encoding import encode_distinct

    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        video = encode_distinct(
            pending.frames,
            pending.order,
            width=pending.width,
            height=pending.height,
            fps=pending.fps,
            audio_wav=pending.wav,
            seconds=pending.seconds,
        )
    except EncodingError as exc:
        raise VideoRejected(f"encoding: {exc}") from None
    seconds["encode"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    check = check_video(
        video,
        timeline=pending.timeline,
        layouts=pending.layouts,
        expected=pending.expected,
        width=pending.width,
        height=pending.height,
        tolerance=max(0.3, 2 / pending.fps),
        rate=pending.fps,
    )
    seconds["check"] = time.perf_counter() - t1
    if not check.ok:
        raise VideoRejected(f"check: {check.errors[0]}")
    return EncodedVideo(video=video, check=check, seconds=seconds)


def with_encoding(made: VideoArtifacts, encoded: EncodedVideo) -> VideoArtifacts:
    """A planned video's artifacts with its encoding in place."""
    from dataclasses import replace

    return replace(
        made,
        video=encoded.video,
        check=encoded.check,
        seconds={**made.seconds, **encoded.seconds},
        pending=None,
    )


def _with_duration(scene: Any, seconds: float) -> Any:
    from dataclasses import replace

    return replace(scene, duration=seconds)


def expected_constants(evidence: EvidencePlan) -> Mapping[str, str]:
    """Atom id -> the display text the video must show."""
    return {a.atom_id: a.display for a in evidence.atoms}


__all__ = [
    "VIDEO_FILE",
    "EncodedVideo",
    "PendingVideo",
    "VideoArtifacts",
    "VideoOptions",
    "VideoRejected",
    "build_video",
    "encode_pending",
    "expected_constants",
    "plan_evidence",
    "schema_of",
    "with_encoding",
]
