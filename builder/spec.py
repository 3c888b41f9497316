"""The build spec: what to load and how every item is built, validated at the edge.

A spec (YAML or JSON)::

    schema_version: "1.0"
    seed: 0
    sources:
      - {kind: ehrsql-jsonl, path: ehrsql_mimic3_demo.jsonl, limit: 50}
      - {kind: bundled, path: finance, options: {question_language: mixed}}
    languages: {database_zh_share: 0.5, cross_language_share: 0.65}
    translator: {name: glossary}          # or {name: llm, model: ..., base_url: ...}
    transform: {theta: 0.5, k_min: 3, protected: []}
    sampling: {budget: 200, attempts: 3}
    task_db: sample                       # or copy (the whole source database)
    renderers: [csv, json, sqlite]
    stage3: {video: {target_seconds: 104}}  # or false; video_share: Stage3Options's default
    semantics: {order_share: 0.35, max_tie_factor: 3.0}

Relative source paths are resolved against the spec file's folder. Every default lives on
its record (``LanguagePlan``, ``Stage3Options``, ``SamplingPolicy`` ...); the parsers read
them from there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.documents.assembly import DocumentOptions
from builder.render.routing import RoutingPolicy
from builder.sampling.policy import SamplingPolicy
from builder.semantics import SemanticsOptions
from builder.sources.base import Rejection, SourceItem
from builder.transform.database import UnitOptions
from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

SPEC_SCHEMA_VERSION = "1.0"
LANGUAGES = ("en", "zh")
STRUCTURED = ("csv", "json", "sqlite")


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
        database: ``auto`` (drawn with ``database_zh_share``), ``en``, ``zh`` or ``source``
            (keep the item's own database language).
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
        if self.database not in ("auto", "source", *LANGUAGES):
            raise ConfigError(
                f"languages.database must be auto, source, en or zh, not {self.database!r}"
            )
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
        if self.database in LANGUAGES:
            db = self.database
        elif self.database == "source":
            db = item.db_language
        else:
            db = "zh" if d_draw < self.database_zh_share else "en"
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
    """Everything a build needs besides where to write.

    Attributes:
        sources: what to load.
        seed: the build seed.
        languages: the language plan.
        translator: provider name and options (``{"name": "glossary"}``).
        units: stage-1 unit and map options.
        sampling: stage-2 policy (its seed is replaced by each task's seed).
        task_db: the task database step: ``sample`` (constraint-aware sampling with
            ``sampling``) or another registered step such as ``copy``.
        renderers: workspace renderers in fallback order.
        dialect: ``{"current_time": ..., "now": ...}`` passed to loaders that take it.
        stage3: routing with documents and videos, as the paper builds every task (the
            default, also when a spec file leaves ``stage3`` out); None (``stage3: false``
            in a file) opts out to structured renderers only.
        semantics: how the fixed "now", ties and a requested order are stated.
    """

    sources: tuple[SourceSpec, ...]
    seed: int = 0
    languages: LanguagePlan = field(default_factory=LanguagePlan)
    translator: Mapping[str, Any] = field(default_factory=lambda: {"name": "glossary"})
    units: UnitOptions = field(default_factory=UnitOptions)
    sampling: SamplingPolicy = field(default_factory=SamplingPolicy)
    task_db: str = "sample"
    renderers: tuple[str, ...] = STRUCTURED
    dialect: Mapping[str, str] = field(default_factory=dict)
    stage3: Mapping[str, Any] | None = field(default_factory=dict)
    semantics: SemanticsOptions = field(default_factory=SemanticsOptions)

    def fingerprint(self) -> str:
        """SHA-256 of every option that changes what a task looks like."""
        body = {
            "seed": self.seed,
            "languages": dataclasses.asdict(self.languages),
            "translator": dict(self.translator),
            "units": self.units.to_json(),
            "sampling": self.sampling.to_json(),
            "task_db": self.task_db,
            "renderers": list(self.renderers),
            "dialect": dict(self.dialect),
            "stage3": _stage3_fingerprint(self.stage3_options()),
            "semantics": dataclasses.asdict(self.semantics),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def stage3_options(self) -> Stage3Options | None:
        """The typed stage-3 options (None: structured renderers only)."""
        return stage3_options(self.stage3)

    def check(self) -> None:
        """Resolve every name now, so a typo fails before any work.

        Raises:
            ConfigError: no renderer, an unknown renderer, task database step or translator.
        """
        from builder.render.base import get_renderer
        from builder.taskdb import get_task_db_step
        from builder.translate.base import TRANSLATORS

        if not self.renderers:
            raise ConfigError("at least one renderer is needed")
        for name in self.renderers:
            get_renderer(name)
        if self.task_db != "sample":
            get_task_db_step(self.task_db)
        if "name" not in self.translator:
            raise ConfigError("translator needs a 'name' (glossary or llm)")
        TRANSLATORS.get(str(self.translator["name"]))
        self.stage3_options()

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
            "task_db",
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
        renderers = tuple(obj.get("renderers") or STRUCTURED)
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
            task_db=str(obj.get("task_db") or "sample"),
            renderers=renderers,
            dialect=dict(obj.get("dialect") or {}),
            stage3=_stage3_mapping(obj.get("stage3", True)),
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


@dataclass(frozen=True, kw_only=True)
class Stage3Options:
    """Options of stage 3 (routing over every modality, documents, video).

    Attributes:
        policy: the routing policy.
        documents: document options (the language and domain are set per task).
        video: video options, or None for no videos.
        video_share: share of the release's tasks that hold a video (the driver meets it
            to the whole task; fewer only when too few items can get one). The default is
            the paper's composition: 189 of 410 workspaces (46.1%) hold a video.
        strategies: video strategies to try, in order of preference (the task seed
            rotates the order so both get used).
        forced: source item id -> strategy for items that must get a video made with that
            strategy (the item is rejected at stage ``video`` when it cannot be made).
    """

    policy: RoutingPolicy = field(default_factory=RoutingPolicy)
    documents: DocumentOptions = field(default_factory=DocumentOptions)
    video: Any = None
    video_share: float = 0.461
    strategies: tuple[str, ...] = ("predicate_abstraction", "answer_evidence")
    forced: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 <= self.video_share <= 1.0:
            raise ConfigError(f"stage3.video_share must be between 0 and 1, not {self.video_share}")


def _stage3_fingerprint(opts: Stage3Options | None) -> Any:
    """What of the parsed stage-3 options changes a task (defaults written out or not).

    ``video_share`` is left out: it chooses which tasks keep their video at release level
    (``builder.driver``), not what one task looks like.

    >>> _stage3_fingerprint(stage3_options({})) == _stage3_fingerprint(
    ...     stage3_options({"video_share": 0.2, "routing": {}}))
    True
    """
    if opts is None:
        return None
    body = dataclasses.asdict(opts)
    body.pop("video_share")
    return json.loads(json.dumps(body, sort_keys=True, default=str))


def _stage3_mapping(raw: Any) -> Mapping[str, Any] | None:
    if raw is None or raw is False:
        return None
    if raw is True:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError("stage3 must be true, false or a mapping")
    stage3_options(raw)  # validate now, so a typo fails before any work
    return dict(raw)


def stage3_options(raw: Mapping[str, Any] | None) -> Stage3Options | None:
    """Stage-3 options from a build spec's ``stage3`` mapping (None: structured renderers only).

    Keys: ``video_share`` (default ``Stage3Options.video_share``), ``video`` (VideoOptions
    fields, or false for no videos), ``strategies``, ``forced`` (item id -> strategy),
    ``routing`` (RoutingPolicy fields, such as ``follow_share`` and ``extra_share``).

    >>> stage3_options(None) is None
    True
    >>> stage3_options({"video_share": 0.5}).video_share
    0.5
    >>> stage3_options({}).video_share == Stage3Options.video_share
    True
    >>> stage3_options({"routing": {"follow_share": 0.25}}).policy.follow_share
    0.25
    """
    if raw is None:
        return None
    from builder.render.video import VideoOptions

    known = {"video_share", "video", "strategies", "forced", "routing"}
    extra = set(raw) - known
    if extra:
        raise ConfigError(f"stage3: unknown fields {sorted(extra)}; known: {sorted(known)}")
    video_raw = raw.get("video", {})
    try:
        video = None if video_raw is False else VideoOptions(**dict(video_raw or {}))
    except TypeError as exc:
        raise ConfigError(f"stage3.video: {exc}") from None
    kwargs: dict[str, Any] = {"video": video}
    routing_raw = raw.get("routing") or {}
    if not isinstance(routing_raw, Mapping):
        raise ConfigError("stage3.routing must be a mapping of routing policy fields")
    fields = {f.name for f in dataclasses.fields(RoutingPolicy)}
    if set(routing_raw) - fields:
        raise ConfigError(
            f"stage3.routing: unknown fields {sorted(set(routing_raw) - fields)}; "
            f"known: {sorted(fields)}"
        )
    policy: dict[str, Any] = {
        str(k): tuple(v) if isinstance(v, list) else v for k, v in routing_raw.items()
    }
    try:
        kwargs["policy"] = RoutingPolicy(**policy)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"stage3.routing: {exc}") from None
    if "video_share" in raw:
        try:
            kwargs["video_share"] = float(raw["video_share"])
        except (TypeError, ValueError):
            raise ConfigError(
                f"stage3.video_share must be a number, not {raw['video_share']!r}"
            ) from None
    if "strategies" in raw:
        kwargs["strategies"] = tuple(raw["strategies"])
    if "forced" in raw:
        forced = raw["forced"]
        if not isinstance(forced, Mapping):
            raise ConfigError("stage3.forced must map item ids to video strategies")
        kwargs["forced"] = {str(k): str(v) for k, v in forced.items()}
    return Stage3Options(**kwargs)


@dataclass(frozen=True, kw_only=True)
class BuildOverrides:
    """What the command line sets over a build spec; None (or empty) keeps the spec's.

    Attributes:
        sources: ``KIND:PATH`` texts that replace the spec's sources.
        limit: build only the first N items of each source.
        seed: the build seed.
        database_language: ``LanguagePlan.database``.
        question_language: ``LanguagePlan.question``.
        cross_language_share: ``LanguagePlan.cross_language_share``.
        translator: the translator provider (drops the spec's translator options).
        model: the llm translator's model id.
        base_url: the llm translator's endpoint.
        budget: the soft row budget per table when sampling.
    """

    sources: tuple[str, ...] = ()
    limit: int | None = None
    seed: int | None = None
    database_language: str | None = None
    question_language: str | None = None
    cross_language_share: float | None = None
    translator: str | None = None
    model: str | None = None
    base_url: str | None = None
    budget: int | None = None


def resolve_build_spec(spec_file: str | Path | None, overrides: BuildOverrides) -> BuildSpec:
    """The build spec from a spec file (or, without one, the sources) and the overrides.

    A source's path other than a bundled corpus's is made absolute; the bundled finance
    corpus asks for mixed question languages, as the bundled spec does.

    Raises:
        ConfigError: neither a spec file nor a source, or a source that is not
            ``KIND:PATH``; what :meth:`BuildSpec.load` raises.
    """
    o = overrides
    if spec_file:
        spec = BuildSpec.load(spec_file)
    elif o.sources:
        spec = BuildSpec(sources=(SourceSpec(kind="bundled", path="finance"),))
    else:
        raise ConfigError("give a build spec file or at least one --source KIND:PATH")
    if o.sources:
        sources = []
        for text in o.sources:
            kind, sep, path = text.partition(":")
            if not sep or not kind or not path:
                raise ConfigError(f"--source {text!r}: expected KIND:PATH")
            if kind != "bundled":
                path = str(Path(path).resolve())
            options = (
                {"question_language": "mixed"} if (kind, path) == ("bundled", "finance") else {}
            )
            sources.append(SourceSpec(kind=kind, path=path, options=options))
        spec = dataclasses.replace(spec, sources=tuple(sources))
    if o.limit is not None:
        spec = dataclasses.replace(
            spec, sources=tuple(dataclasses.replace(s, limit=o.limit) for s in spec.sources)
        )
    if o.seed is not None:
        spec = dataclasses.replace(spec, seed=o.seed)
    lang: dict[str, Any] = {}
    if o.database_language:
        lang["database"] = o.database_language
    if o.question_language:
        lang["question"] = o.question_language
    if o.cross_language_share is not None:
        lang["cross_language_share"] = o.cross_language_share
    if lang:
        spec = dataclasses.replace(spec, languages=dataclasses.replace(spec.languages, **lang))
    translator: dict[str, Any] = dict(spec.translator)
    if o.translator:
        translator = {"name": o.translator}
    if o.model:
        translator["model"] = o.model
    if o.base_url:
        translator["base_url"] = o.base_url
    spec = dataclasses.replace(spec, translator=translator)
    if o.budget is not None:
        spec = dataclasses.replace(
            spec, sampling=dataclasses.replace(spec.sampling, budget=o.budget)
        )
    return spec


def load_items(spec: BuildSpec) -> tuple[list[SourceItem], list[Rejection], list[str], float]:
    """Load every source of the spec.

    Returns:
        The items, the load rejections, the ids the sources mark as unanswerable and the
        seconds loading took.
    """
    import time

    from builder.dialect import DialectOptions
    from builder.sources.base import load_source

    started = time.perf_counter()
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
    return items, rejected, skipped, time.perf_counter() - started


__all__ = [
    "SPEC_SCHEMA_VERSION",
    "STRUCTURED",
    "BuildOverrides",
    "BuildSpec",
    "LanguagePlan",
    "SourceSpec",
    "Stage3Options",
    "load_items",
    "resolve_build_spec",
    "stage3_options",
]
