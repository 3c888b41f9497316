"""The parallel build: a Ray job that builds every item of a source spec into one release.

Per item: choose the workspace languages (database and question independently, seeded, with
a configurable cross-language share) → stage 1 (cross-language transformation) → stage 2
(constraint-aware sampling, as the pipeline's ``task_db`` step) → the pipeline's gold,
rendering, config and metadata. Items are built by Ray tasks (a local ``ray.init()`` unless
an address is given) and content-addressed: a cache folder keyed by the item's content, the
build options and the code version holds each finished item (its artifacts, or its
rejection), so a rerun rebuilds only what changed. One bad item never stops the batch: every
rejected item is listed in the build report with its stage and reason. The release is then
written with ``ReleaseWriter`` (``task_1..task_N`` in source order).

A source spec (YAML or JSON)::

    schema_version: "1.0"
    seed: 0
    sources:
      - {kind: ehrsql-jsonl, path: ehrsql_mimic3_demo.jsonl, limit: 50}
      - {kind: bundled, path: finance, options: {question_language: mixed}}
    languages: {database_zh_share: 0.5, cross_language_share: 0.65}
    translator: {name: glossary}          # or {name: llm, model: ..., base_url: ...}
    transform: {theta: 0.5, k_min: 3, protected: []}
    sampling: {budget: 200, attempts: 3}
    renderers: [csv, json, sqlite]
    semantics: {order_share: 0.35, max_tie_factor: 3.0}

Relative source paths are resolved against the spec file's folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import shutil
import time
import traceback
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.report import (
    REPORT_NAME,
    AcceptedItem,
    nothing_built,
    pop_timings,
    write_report_json,
)
from builder.sampling.policy import SamplingPolicy
from builder.semantics import SemanticsOptions
from builder.sources.base import Rejection, SourceItem
from builder.transform.database import UnitOptions
from dataspace.errors import BuildError, ConfigError, InfrastructureError

logger = logging.getLogger(__name__)

SPEC_SCHEMA_VERSION = "1.0"
PROVISIONAL_TASK_ID = "task_0"
LANGUAGES = ("en", "zh")


# ---- the spec ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """One source to load with ``load_source(kind, path, **options)``.

    ``limit`` keeps only its first items.
    """

    kind: str
    path: str
    options: Mapping[str, Any] = field(default_factory=dict)
    limit: int | None = None


@dataclass(frozen=True, kw_only=True)
class LanguagePlan:
    """How each item's workspace languages are chosen (seeded per item).

    Attributes:
        database: ``auto`` (drawn with ``database_zh_share``), ``en`` or ``zh``.
        question: ``auto`` (cross-language with ``cross_language_share``), ``en``, ``zh``
            or ``source`` (keep the item's own question language).
        database_zh_share: probability that a database is Chinese.
        cross_language_share: probability that the question is in the other language.
    """

    database: str = "auto"
    question: str = "auto"
    database_zh_share: float = 0.5
    cross_language_share: float = 0.65

    def __post_init__(self) -> None:
        if self.database not in ("auto", *LANGUAGES):
            raise ConfigError(f"languages.database must be auto, en or zh, not {self.database!r}")
        if self.question not in ("auto", "source", *LANGUAGES):
            raise ConfigError(
                f"languages.question must be auto, source, en or zh, not {self.question!r}"
            )
        for name in ("database_zh_share", "cross_language_share"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"languages.{name} must be between 0 and 1, not {v}")

    def choose(self, item: SourceItem, seed: int) -> tuple[str, str]:
        """``(database language, question language)`` of an item.

        >>> plan = LanguagePlan(database="zh", cross_language_share=1.0)
        >>> item = SourceItem(corpus="c", id="1", question="q", sql="select 1",
        ...                   db_path=Path("x"), db_id="x", question_language="en",
        ...                   db_language="en")
        >>> plan.choose(item, 0)
        ('zh', 'en')
        """
        digest = hashlib.sha256(f"{seed}\0languages\0{item.corpus}\0{item.id}".encode())
        rng = random.Random(int.from_bytes(digest.digest()[:8], "big"))
        d_draw, q_draw = rng.random(), rng.random()
        db = (
            self.database
            if self.database != "auto"
            else ("zh" if d_draw < self.database_zh_share else "en")
        )
        if self.question in LANGUAGES:
            q = self.question
        elif self.question == "source":
            q = item.question_language
        else:
            other = "en" if db == "zh" else "zh"
            q = other if q_draw < self.cross_language_share else db
        return db, q


@dataclass(frozen=True, kw_only=True)
class BuildSpec:
    """Everything a parallel build needs besides where to write.

    Attributes:
        sources: what to load.
        seed: the build seed.
        languages: the language plan.
        translator: provider name and options (``{"name": "glossary"}``).
        units: stage-1 unit and map options.
        sampling: stage-2 policy (its seed is replaced by each task's seed).
        renderers: workspace renderers in fallback order.
        dialect: ``{"current_time": ..., "now": ...}`` passed to loaders that take it.
        stage3: routing with documents and videos (None: structured renderers only).
        semantics: how the fixed "now", ties and a requested order are stated.
    """

    sources: tuple[SourceSpec, ...]
    seed: int = 0
    languages: LanguagePlan = field(default_factory=LanguagePlan)
    translator: Mapping[str, Any] = field(default_factory=lambda: {"name": "glossary"})
    units: UnitOptions = field(default_factory=UnitOptions)
    sampling: SamplingPolicy = field(default_factory=SamplingPolicy)
    renderers: tuple[str, ...] = ("csv", "json", "sqlite")
    dialect: Mapping[str, str] = field(default_factory=dict)
    stage3: Mapping[str, Any] | None = None
    semantics: SemanticsOptions = field(default_factory=SemanticsOptions)

    def fingerprint(self) -> str:
        """SHA-256 of every option that changes what a task looks like."""
        body = {
            "seed": self.seed,
            "languages": dataclasses.asdict(self.languages),
            "translator": dict(self.translator),
            "units": self.units.to_json(),
            "sampling": self.sampling.to_json(),
            "renderers": list(self.renderers),
            "dialect": dict(self.dialect),
            "stage3": None if self.stage3 is None else dict(self.stage3),
            "semantics": dataclasses.asdict(self.semantics),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any], *, base: Path | None = None) -> BuildSpec:
        """Validate a parsed spec (``base``: folder relative source paths start from).

        Raises:
            ConfigError: one line naming the bad field.
        """
        known = {
            "schema_version",
            "seed",
            "sources",
            "languages",
            "translator",
            "transform",
            "sampling",
            "renderers",
            "dialect",
            "stage3",
            "semantics",
        }
        extra = set(obj) - known
        if extra:
            raise ConfigError(f"unknown build spec fields {sorted(extra)}; known: {sorted(known)}")
        version = str(obj.get("schema_version", SPEC_SCHEMA_VERSION))
        if version != SPEC_SCHEMA_VERSION:
            raise ConfigError(
                f"build spec schema_version {version!r} is not supported "
                f"(expected {SPEC_SCHEMA_VERSION!r})"
            )
        raw_sources = obj.get("sources")
        if not isinstance(raw_sources, list) or not raw_sources:
            raise ConfigError("build spec needs a non-empty 'sources' list")
        sources = []
        for n, s in enumerate(raw_sources):
            if not isinstance(s, Mapping) or not s.get("kind") or not s.get("path"):
                raise ConfigError(f"sources[{n}] needs 'kind' and 'path'")
            path = str(s["path"])
            if base is not None and s["kind"] != "bundled" and not Path(path).is_absolute():
                path = str((base / path).resolve())
            limit = s.get("limit")
            if limit is not None and (not isinstance(limit, int) or limit < 0):
                raise ConfigError(f"sources[{n}].limit must be a non-negative integer")
            sources.append(
                SourceSpec(
                    kind=str(s["kind"]),
                    path=path,
                    options=dict(s.get("options") or {}),
                    limit=limit,
                )
            )
        try:
            languages = LanguagePlan(**dict(obj.get("languages") or {}))
        except TypeError as exc:
            raise ConfigError(f"languages: {exc}") from None
        translator = dict(obj.get("translator") or {"name": "glossary"})
        if "name" not in translator:
            raise ConfigError("translator needs a 'name' (glossary or llm)")
        tr = dict(obj.get("transform") or {})
        if "protected" in tr:
            tr["protected"] = tuple(tr["protected"])
        try:
            units = UnitOptions(**tr)
        except TypeError as exc:
            raise ConfigError(f"transform: {exc}") from None
        sampling = SamplingPolicy.from_json(dict(obj.get("sampling") or {}))
        renderers = tuple(obj.get("renderers") or ("csv", "json", "sqlite"))
        try:
            semantics = SemanticsOptions(**dict(obj.get("semantics") or {}))
        except TypeError as exc:
            raise ConfigError(f"semantics: {exc}") from None
        seed = obj.get("seed", 0)
        if not isinstance(seed, int):
            raise ConfigError("seed must be an integer")
        return cls(
            sources=tuple(sources),
            seed=seed,
            languages=languages,
            translator=translator,
            units=units,
            sampling=sampling,
            renderers=renderers,
            dialect=dict(obj.get("dialect") or {}),
            stage3=_stage3_mapping(obj.get("stage3")),
            semantics=semantics,
        )

    @classmethod
    def load(cls, path: Path | str) -> BuildSpec:
        """Read a spec file (YAML or JSON)."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read build spec ({exc.strerror or exc})") from None
        try:
            if p.suffix.lower() == ".json":
                obj = json.loads(text)
            else:
                import yaml

                obj = yaml.safe_load(text)
        except Exception as exc:  # yaml and json raise different types
            raise ConfigError(f"{p}: cannot parse build spec ({exc})") from None
        if not isinstance(obj, Mapping):
            raise ConfigError(f"{p}: a build spec must be a mapping")
        try:
            return cls.from_mapping(obj, base=p.parent.resolve())
        except ConfigError as exc:
            raise ConfigError(f"{p}: {exc}") from None


# ---- the report ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ParallelBuildReport:
    """What a parallel build did.

    Attributes:
        release: the release folder.
        seed: the build seed.
        accepted: accepted items with their task ids, in task order.
        rejected: every rejected item with its stage and reason (load rejections first).
        skipped: ids the sources mark as unanswerable.
        timings: seconds per stage, summed over the items built now.
        wall_seconds: the whole build.
        workers: Ray workers used (0: in-process).
        cached: items taken from the cache.
        built: items built now.
        items: one record per item (languages, status, seconds, cached).
    """

    release: str
    seed: int
    accepted: tuple[AcceptedItem, ...]
    rejected: tuple[Rejection, ...]
    skipped: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0
    workers: int = 0
    cached: int = 0
    built: int = 0
    items: tuple[Mapping[str, Any], ...] = ()

    @property
    def items_per_minute(self) -> float:
        """Items handled per minute of wall time."""
        n = len(self.accepted) + len(self.rejected)
        return 60.0 * n / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def rejection_summary(self) -> dict[str, dict[str, int]]:
        """``{stage: {reason (numbers and quotes folded): count}}``."""
        import re

        out: dict[str, dict[str, int]] = {}
        for r in self.rejected:
            reason = re.sub(r"'[^']*'", "'…'", r.reason)
            reason = re.sub(r"\d+", "N", reason)
            out.setdefault(r.stage, {})
            out[r.stage][reason] = out[r.stage].get(reason, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (a superset of the pipeline's build report)."""
        langs: dict[str, int] = {}
        for it in self.items:
            if it.get("status") == "accepted":
                key = f"database={it['languages'][0]},question={it['languages'][1]}"
                langs[key] = langs.get(key, 0) + 1
        return {
            "schema_version": "1.0",
            "release": self.release,
            "seed": self.seed,
            "counts": {
                "accepted": len(self.accepted),
                "rejected": len(self.rejected),
                "skipped": len(self.skipped),
                "cached": self.cached,
                "built": self.built,
            },
            "accepted": [
                {"corpus": a.corpus, "id": a.id, "task_id": a.task_id} for a in self.accepted
            ],
            "rejected": [r.to_json() for r in self.rejected],
            "rejections_by_stage": self.rejection_summary(),
            "skipped": list(self.skipped),
            "languages": langs,
            "timings": {k: round(v, 4) for k, v in sorted(self.timings.items())},
            "wall_seconds": round(self.wall_seconds, 3),
            "workers": self.workers,
            "items_per_minute": round(self.items_per_minute, 2),
            "items": [dict(i) for i in self.items],
        }

    def write(self, path: Path) -> None:
        """Write the report as JSON (temp file + rename)."""
        write_report_json(path, self.to_json())


# ---- content addressing ----------------------------------------------------------------------

_CODE_VERSION: str | None = None
_DB_HASHES: dict[tuple[str, int, int], str] = {}


def code_version() -> str:
    """SHA-256 over the builder's and the evaluator's code and data (cache invalidation)."""
    global _CODE_VERSION
    if _CODE_VERSION is None:
        root = Path(__file__).resolve().parent.parent
        h = hashlib.sha256()
        for pkg in ("builder", "evaluator"):
            base = root / pkg
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*")):
                if (
                    path.is_file()
                    and path.suffix in (".py", ".json", ".sql")
                    and "__pycache__" not in path.parts
                ):
                    h.update(path.relative_to(root).as_posix().encode() + b"\0")
                    h.update(path.read_bytes() + b"\0")
        _CODE_VERSION = h.hexdigest()
    return _CODE_VERSION


def _db_sha(path: Path) -> str:
    from builder.transform.schema import file_sha256

    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DB_HASHES:
        _DB_HASHES[key] = file_sha256(path)
    return _DB_HASHES[key]


def item_key(item: SourceItem, languages: tuple[str, str], spec: BuildSpec) -> str:
    """The content address of one item's build."""
    extra = json.loads(json.dumps(dict(item.extra), default=str, sort_keys=True))
    body = {
        "item": {
            "corpus": item.corpus,
            "id": item.id,
            "question": item.question,
            "sql": item.sql,
            "db_id": item.db_id,
            "db": _db_sha(item.db_path),
            "question_language": item.question_language,
            "db_language": item.db_language,
            "extra": extra,
        },
        "languages": list(languages),
        "spec": spec.fingerprint(),
        "code": code_version(),
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ItemCache:
    """Finished items on disk, one folder per content address.

    ``items/<key[:2]>/<key>/`` holds ``result.json`` and, for an accepted item, its
    artifacts. Entries appear atomically (temp folder + rename).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, key: str) -> Path:
        """Where an item's entry lives."""
        return self.root / "items" / key[:2] / key

    def result(self, key: str) -> dict[str, Any] | None:
        """The cached result of an item, or None."""
        path = self.folder(key) / "result.json"
        if not path.is_file():
            return None
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None
        return obj if isinstance(obj, dict) else None

    def store(self, key: str, result: Mapping[str, Any], artifacts: Any = None) -> None:
        """Write an entry (a no-op when another worker wrote it first)."""
        final = self.folder(key)
        if final.exists():
            return
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".{key}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.mkdir()
        try:
            if artifacts is not None:
                _dump_artifacts(tmp, artifacts)
            (tmp / "result.json").write_text(
                json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8"
            )
            os.rename(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not final.exists():
                raise

    def artifacts(self, key: str, task_id: str) -> Any:
        """The cached artifacts of an accepted item, restamped with ``task_id``."""
        return _load_artifacts(self.folder(key), task_id)


def _dump_artifacts(folder: Path, art: Any) -> None:
    ctx = folder / "context"
    for rel, src in art.context.items():
        dest = ctx / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            dest.write_bytes(src)
        else:
            shutil.copyfile(src, dest)
    lf = folder / "ledger_files"
    for rel, src in art.ledger_files.items():
        dest = lf / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(src, bytes):
            dest.write_bytes(src)
        else:
            shutil.copyfile(src, dest)
    if art.gold_csv is not None:
        (folder / "gold.csv").write_bytes(art.gold_csv)
    body = {
        "question": art.question,
        "task_extra": dict(art.task_extra),
        "config": dict(art.config),
        "metadata": dict(art.metadata),
        "ledger": dict(art.ledger),
        "context": sorted(art.context),
        "ledger_files": sorted(art.ledger_files),
        "gold": art.gold_csv is not None,
    }
    (folder / "artifacts.json").write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")


def _load_artifacts(folder: Path, task_id: str) -> Any:
    from dataspace.release import TaskArtifacts

    body = json.loads((folder / "artifacts.json").read_text(encoding="utf-8"))
    config = dict(body["config"])
    if config.get("task_id") == PROVISIONAL_TASK_ID:
        config["task_id"] = task_id
    metadata = dict(body["metadata"])
    if metadata.get("task_id") == PROVISIONAL_TASK_ID:
        metadata["task_id"] = task_id
    return TaskArtifacts(
        task_id=task_id,
        question=body["question"],
        context={rel: folder / "context" / rel for rel in body["context"]},
        gold_csv=(folder / "gold.csv").read_bytes() if body["gold"] else None,
        config=config,
        metadata=metadata,
        ledger=body["ledger"],
        ledger_files={rel: folder / "ledger_files" / rel for rel in body["ledger_files"]},
        task_extra=body["task_extra"],
    )


# ---- building one item (runs in a Ray worker) --------------------------------------------------

_TRANSLATORS: dict[str, Any] = {}


def _translator(config: Mapping[str, Any]) -> Any:
    from builder.translate import get_translator

    key = json.dumps(dict(config), sort_keys=True)
    if key not in _TRANSLATORS:
        opts = dict(config)
        name = opts.pop("name")
        _TRANSLATORS[key] = get_translator(name, **opts)
    return _TRANSLATORS[key]


@dataclass(frozen=True, kw_only=True)
class ItemJob:
    """One item to build, as shipped to a worker."""

    item: SourceItem
    languages: tuple[str, str]
    key: str
    spec: BuildSpec
    cache_root: str


def build_item(job: ItemJob) -> dict[str, Any]:
    """Build one item and store it in the cache; never raises for a bad item.

    Returns:
        ``{"key", "status", "stage", "reason", "timings", "languages"}``; ``status`` is
        ``accepted``, ``rejected`` (cached) or ``failed`` (infrastructure, not cached).
    """
    started = time.perf_counter()
    cache = ItemCache(Path(job.cache_root))
    base = {
        "key": job.key,
        "languages": list(job.languages),
        "corpus": job.item.corpus,
        "id": job.item.id,
    }
    timings: dict[str, float] = {}
    try:
        art = _build_item(job, timings)
    except BuildError as exc:
        result = {
            **base,
            "status": "rejected",
            "stage": exc.stage,
            "reason": exc.reason,
            "timings": _round(timings),
            "seconds": round(time.perf_counter() - started, 4),
        }
        cache.store(job.key, result)
        return result
    except (InfrastructureError, ConfigError) as exc:
        return {
            **base,
            "status": "failed",
            "stage": "infrastructure" if isinstance(exc, InfrastructureError) else "config",
            "reason": str(exc),
            "timings": _round(timings),
            "seconds": round(time.perf_counter() - started, 4),
        }
    except Exception as exc:  # one bad item never stops the batch
        logger.warning(
            "item %s/%s failed unexpectedly:\n%s",
            job.item.corpus,
            job.item.id,
            traceback.format_exc(),
        )
        return {
            **base,
            "status": "failed",
            "stage": "internal",
            "reason": f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
            "timings": _round(timings),
            "seconds": round(time.perf_counter() - started, 4),
        }
    result = {
        **base,
        "status": "accepted",
        "timings": _round(timings),
        "seconds": round(time.perf_counter() - started, 4),
    }
    cache.store(job.key, result, art)
    return result


def _round(t: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in t.items()}


def _stage3_mapping(raw: Any) -> Mapping[str, Any] | None:
    if raw is None or raw is False:
        return None
    if raw is True:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("stage3 must be true, false or a mapping")
    stage3_options(raw)  # validate now, so a typo fails before any work
    return dict(raw)


def stage3_options(raw: Mapping[str, Any] | None) -> Any:
    """Stage-3 options from a build spec's ``stage3`` mapping (None: structured renderers only).

    Keys: ``video_share`` (default ``Stage3Options.video_share``), ``video``
    (VideoOptions fields, or false for no
    videos), ``strategies``.

    >>> stage3_options(None) is None
    True
    >>> stage3_options({"video_share": 0.5}).video_share
    0.5
    """
    if raw is None:
        return None
    from builder.render.video import VideoOptions
    from builder.routing import Stage3Options

    known = {"video_share", "video", "strategies"}
    extra = set(raw) - known
    if extra:
        raise ConfigError(f"stage3: unknown fields {sorted(extra)}; known: {sorted(known)}")
    video_raw = raw.get("video", {})
    try:
        video = None if video_raw is False else VideoOptions(**dict(video_raw or {}))
    except TypeError as exc:
        raise ConfigError(f"stage3.video: {exc}") from None
    kwargs: dict[str, Any] = {"video": video}
    if "video_share" in raw:
        kwargs["video_share"] = float(raw["video_share"])
    if "strategies" in raw:
        kwargs["strategies"] = tuple(raw["strategies"])
    return Stage3Options(**kwargs)


def _build_item(job: ItemJob, timings: dict[str, float]) -> Any:
    from builder import pipeline
    from builder.report import StageTimer
    from builder.sampling.step import register_sampling_step
    from builder.transform import TransformOptions, transform

    item, spec = job.item, job.spec
    db_lang, q_lang = job.languages
    t0 = time.perf_counter()
    translator = _translator(spec.translator)
    tr = transform(
        item.db_path,
        item.question,
        item.sql,
        question_language=q_lang,
        db_language=db_lang,
        translator=translator,
        source_question_language=item.question_language,
        source_db_language=item.db_language,
        options=TransformOptions(units=spec.units, cache_dir=Path(job.cache_root) / "transform"),
        item_id=item.id,
        domain=str(item.extra.get("domain", "")),
        questions=item.extra.get("questions"),
        template=(
            {"q_tag": item.extra["q_tag"], "value": item.extra.get("value") or {}}
            if item.extra.get("q_tag")
            else None
        ),
    )
    timings["transform"] = time.perf_counter() - t0
    transformed = dataclasses.replace(
        item,
        question=tr.question,
        sql=tr.sql,
        db_path=tr.db_path,
        question_language=q_lang,
        db_language=db_lang,
        extra={**item.extra, "source_question": item.question, "source_sql": item.sql},
    )
    step = register_sampling_step(spec.sampling)
    options = pipeline.BuildOptions(
        renderers=tuple(spec.renderers),
        task_db=step,
        workspace_language=db_lang,
        stage3=stage3_options(spec.stage3),
        semantics=spec.semantics,
    )
    timer = StageTimer()
    build = getattr(pipeline, "_build", None)
    if build is not None:
        art = build(
            transformed, task_id=PROVISIONAL_TASK_ID, seed=spec.seed, options=options, timer=timer
        )
    else:  # pragma: no cover - depends on the pipeline's internals
        art = pipeline.build_task(
            transformed, task_id=PROVISIONAL_TASK_ID, seed=spec.seed, options=options
        )
    for stage, secs in timer.totals.items():
        timings["sample" if stage == "task_db" else stage] = secs
    ledger = dict(art.ledger)
    task_db = dict(ledger.get("task_db", {}))
    sampling = task_db.pop("sampling", None)
    ledger["task_db"] = task_db
    source = dict(ledger.get("source", {}))
    source.update(
        {
            "question": item.question,
            "sql": item.extra.get("sql_original", item.sql),
            "sql_normalized": item.sql,
            "languages": {"question": item.question_language, "database": item.db_language},
        }
    )
    ledger["source"] = source
    ledger["transform"] = tr.ledger
    if sampling is not None:
        ledger["sampling"] = sampling
    for name, secs in pop_timings(ledger).items():
        timings[name] = timings.get(name, 0.0) + secs
    return dataclasses.replace(art, ledger=ledger)


# ---- the driver ---------------------------------------------------------------------------------


ProgressFn = Callable[[int, int, Mapping[str, Any]], None]


def load_items(spec: BuildSpec) -> tuple[list[SourceItem], list[Rejection], list[str]]:
    """Load every source of the spec (load rejections and skipped ids collected)."""
    from builder.dialect import DialectOptions
    from builder.sources.base import load_source

    items: list[SourceItem] = []
    rejected: list[Rejection] = []
    skipped: list[str] = []
    for src in spec.sources:
        opts = dict(src.options)
        if spec.dialect and src.kind != "bundled" and "dialect" not in opts:
            opts["dialect"] = DialectOptions(**dict(spec.dialect))
        loaded = load_source(src.kind, src.path, **opts)
        chosen = list(loaded)[: src.limit] if src.limit is not None else list(loaded)
        items.extend(chosen)
        rejected.extend(getattr(loaded, "rejections", []))
        skipped.extend(getattr(loaded, "skipped", []))
    return items, rejected, skipped


def build_parallel(
    spec: BuildSpec | Path | str,
    dest: Path | str,
    *,
    workers: int = 2,
    cache_dir: Path | str | None = None,
    replace: bool = False,
    ray_address: str | None = None,
    progress: ProgressFn | None = None,
) -> ParallelBuildReport:
    """Build every item of ``spec`` into a release at ``dest``, in parallel over Ray.

    Args:
        spec: a ``BuildSpec`` or a spec file.
        dest: the release folder to create.
        workers: Ray workers (CPUs) for a local Ray; 0 builds in this process.
        cache_dir: the item cache (default ``<dest parent>/.build-cache``).
        replace: replace an existing release at ``dest``.
        ray_address: an existing Ray cluster to use instead of a local one.
        progress: called as ``progress(done, total, result)`` after each item.

    Returns:
        The report, also written as ``build_report.json`` next to ``dest``.

    Raises:
        ConfigError: a bad spec or option.
        BuildError: every item was rejected (the report is written first).
        ReleaseError: ``dest`` exists without ``replace``.
    """
    started = time.perf_counter()
    if not isinstance(spec, BuildSpec):
        spec = BuildSpec.load(spec)
    dest = Path(dest).resolve()
    if dest.exists() and not replace:
        from dataspace.errors import ReleaseError

        raise ReleaseError(dest, "already exists (pass replace to rebuild it)")
    cache_root = Path(cache_dir).resolve() if cache_dir else dest.parent / ".build-cache"
    cache = ItemCache(cache_root)
    _translator(spec.translator)  # fail fast on a bad translator config
    from builder.pipeline import BuildOptions

    BuildOptions(renderers=tuple(spec.renderers)).check()
    items, rejected, skipped = load_items(spec)
    t_load = time.perf_counter() - started
    jobs: list[ItemJob] = []
    results: dict[str, dict[str, Any]] = {}
    cached = 0
    for item in items:
        langs = spec.languages.choose(item, spec.seed)
        key = item_key(item, langs, spec)
        jobs.append(
            ItemJob(item=item, languages=langs, key=key, spec=spec, cache_root=str(cache_root))
        )
        hit = cache.result(key)
        if hit is not None and (
            hit.get("status") != "accepted" or (cache.folder(key) / "artifacts.json").is_file()
        ):
            results[key] = {**hit, "cached": True}
            cached += 1
    todo = [j for j in jobs if j.key not in results]
    total = len(jobs)
    done_count = len(results)
    if progress is not None and done_count:
        progress(done_count, total, {"status": "cached", "count": done_count})

    def record(res: dict[str, Any]) -> None:
        nonlocal done_count
        results[res["key"]] = {**res, "cached": False}
        done_count += 1
        if progress is not None:
            progress(done_count, total, res)

    if todo:
        if workers <= 0:
            for job in todo:
                record(build_item(job))
        else:
            _run_ray(todo, workers, ray_address, record)

    report = _write_release(
        spec,
        dest,
        jobs,
        results,
        cache,
        rejected,
        skipped,
        replace,
        workers,
        cached,
        t_load,
        started,
    )
    return report


def _run_ray(
    jobs: Sequence[ItemJob],
    workers: int,
    address: str | None,
    record: Callable[[dict[str, Any]], None],
) -> None:
    import ray
    from ray.exceptions import RayError, RayTaskError

    from dataspace.runs.ray_start import connect_ray

    started_here = connect_ray(address=address, num_cpus=workers)
    try:
        remote = ray.remote(num_cpus=1, max_retries=1)(build_item)
        pending = {remote.remote(job): job for job in jobs}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            job = pending.pop(ref)
            try:
                record(ray.get(ref))
            except (RayError, RayTaskError) as exc:
                cause = exc.cause if isinstance(exc, RayTaskError) else exc
                record(
                    {
                        "key": job.key,
                        "corpus": job.item.corpus,
                        "id": job.item.id,
                        "languages": list(job.languages),
                        "status": "failed",
                        "stage": "infrastructure",
                        "reason": f"{type(cause).__name__}: {cause}".splitlines()[0][:300],
                        "timings": {},
                        "seconds": 0.0,
                    }
                )
    finally:
        if started_here:
            ray.shutdown()


def _write_release(
    spec: BuildSpec,
    dest: Path,
    jobs: list[ItemJob],
    results: dict[str, dict[str, Any]],
    cache: ItemCache,
    load_rejected: list[Rejection],
    skipped: list[str],
    replace: bool,
    workers: int,
    cached: int,
    t_load: float,
    started: float,
) -> ParallelBuildReport:
    from dataspace.release import ReleaseWriter

    accepted: list[AcceptedItem] = []
    rejected = list(load_rejected)
    timings: dict[str, float] = {"load": t_load}
    records: list[dict[str, Any]] = []
    manifest = {
        "builder": {
            "seed": spec.seed,
            "translator": spec.translator.get("name"),
            "renderers": list(spec.renderers),
            "sampling": spec.sampling.to_json(),
            "languages": dataclasses.asdict(spec.languages),
            "code_version": code_version(),
        },
        "corpora": sorted({j.item.corpus for j in jobs}),
    }

    def report() -> ParallelBuildReport:
        return ParallelBuildReport(
            release=str(dest),
            seed=spec.seed,
            accepted=tuple(accepted),
            rejected=tuple(rejected),
            skipped=tuple(skipped),
            timings=timings,
            wall_seconds=time.perf_counter() - started,
            workers=workers,
            cached=cached,
            built=len(jobs) - cached,
            items=tuple(records),
        )

    writer = ReleaseWriter(dest, replace=replace, manifest=manifest)
    with writer:
        t_write = time.perf_counter()
        for job in jobs:
            res = results.get(
                job.key, {"status": "failed", "stage": "internal", "reason": "no result"}
            )
            rec = {
                "corpus": job.item.corpus,
                "id": job.item.id,
                "languages": list(job.languages),
                "status": res.get("status"),
                "cached": res.get("cached", False),
                "seconds": res.get("seconds", 0.0),
            }
            if not res.get("cached"):
                for stage, secs in (res.get("timings") or {}).items():
                    timings[stage] = timings.get(stage, 0.0) + float(secs)
            if res.get("status") == "accepted":
                task_id = f"task_{len(accepted) + 1}"
                writer.add_task(cache.artifacts(job.key, task_id))
                accepted.append(
                    AcceptedItem(corpus=job.item.corpus, id=job.item.id, task_id=task_id)
                )
                rec["task_id"] = task_id
            else:
                rejected.append(
                    Rejection(
                        corpus=job.item.corpus,
                        id=job.item.id,
                        stage=str(res.get("stage")),
                        reason=str(res.get("reason")),
                    )
                )
                rec.update({"stage": res.get("stage"), "reason": res.get("reason")})
            records.append(rec)
        timings["write"] = time.perf_counter() - t_write
        if not accepted:
            raise nothing_built(report(), dest, len(rejected))
    final = report()
    final.write(dest.parent / REPORT_NAME)
    logger.info(
        "built %s: %d tasks, %d rejected (%d from cache) in %.1fs",
        dest,
        len(accepted),
        len(rejected),
        cached,
        final.wall_seconds,
    )
    return final


__all__ = [
    "PROVISIONAL_TASK_ID",
    "BuildSpec",
    "ItemCache",
    "ItemJob",
    "LanguagePlan",
    "ParallelBuildReport",
    "SourceSpec",
    "build_item",
    "build_parallel",
    "code_version",
    "item_key",
    "load_items",
]
