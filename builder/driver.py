"""The one build driver: every item of a spec through the stages, in process or on Ray.

Per item: choose its languages (seeded, ``LanguagePlan``), look it up in the item cache
(``builder.cache``), and otherwise run it through ``builder.stages.STAGES``. Items run in
this process (``workers=0``) or as Ray tasks (a local ``ray.init()`` unless an address is
given); either way each item is built by ``build_item``, which stores its result in the
cache and never raises for a bad item. The release is then written with ``ReleaseWriter``
(``task_1..task_N`` in source order) and the build report (every rejected item with its
stage and reason, timings per stage) beside it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.cache import ItemCache, code_version, item_key
from builder.report import REPORT_NAME, AcceptedItem, BuildReport, nothing_built
from builder.sources.base import Rejection, SourceItem, one_line
from builder.spec import BuildSpec, SourceSpec, load_items
from builder.stages import STAGES, StageContext, initial_state, run_stages
from dataspace.errors import BuildError, ConfigError, InfrastructureError

logger = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, Mapping[str, Any]], None]

_CONTEXTS: dict[tuple[str, str], StageContext] = {}
_CONTEXT_LOCK = threading.Lock()


def stage_context(spec: BuildSpec, cache_root: Path | str | None = None) -> StageContext:
    """The resolved context of a build in this process (translator made once).

    Raises:
        ConfigError: an unknown renderer, task database step or translator, or bad options.
    """
    from builder.sampling.step import register_sampling_step
    from builder.translate import get_translator

    key = (spec.fingerprint(), str(cache_root or ""))
    with _CONTEXT_LOCK:
        if key not in _CONTEXTS:
            spec.check()
            opts = dict(spec.translator)
            name = str(opts.pop("name"))
            task_db = (
                register_sampling_step(spec.sampling) if spec.task_db == "sample" else spec.task_db
            )
            _CONTEXTS[key] = StageContext(
                spec=spec,
                stage3=spec.stage3_options(),
                task_db=task_db,
                translator=get_translator(name, **opts),
                cache_root=Path(cache_root) if cache_root else None,
            )
        return _CONTEXTS[key]


def build_task(
    item: SourceItem,
    spec: BuildSpec,
    *,
    languages: tuple[str, str] | None = None,
    task_id: str = "",
    cache_dir: Path | str | None = None,
) -> Any:
    """Build one item through every stage and return its ``TaskArtifacts``.

    Args:
        item: the source item.
        spec: the build spec (its sources are not read).
        languages: ``(database, question)``; default: the spec's language plan.
        task_id: the task id to build under (default: the provisional ``task_0``).
        cache_dir: where stage 1 caches translated databases.

    Raises:
        BuildError: the item was rejected (stage and one-line reason attached).
        ConfigError: the spec names an unknown provider.
    """
    langs = languages or spec.languages.choose(item, spec.seed)
    state = initial_state(item, languages=langs, build_seed=spec.seed, task_id=task_id)
    return run_stages(state, stage_context(spec, cache_dir), STAGES).artifacts


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
        ``{"key", "status", "stage", "reason", "timings", "languages", ...}``; ``status``
        is ``accepted``, ``rejected`` (cached) or ``failed`` (infrastructure, not cached).
    """
    started = time.perf_counter()
    cache = ItemCache(Path(job.cache_root))
    base = {
        "key": job.key,
        "languages": list(job.languages),
        "corpus": job.item.corpus,
        "id": job.item.id,
    }

    def seconds() -> float:
        return round(time.perf_counter() - started, 4)

    try:
        ctx = stage_context(job.spec, job.cache_root)
        state = initial_state(job.item, languages=job.languages, build_seed=job.spec.seed)
        state = run_stages(state, ctx, STAGES)
    except BuildError as exc:
        result = {
            **base,
            "status": "rejected",
            "stage": exc.stage,
            "reason": one_line(exc.reason),
            "timings": {},
            "seconds": seconds(),
        }
        cache.store(job.key, result)
        return result
    except (InfrastructureError, ConfigError) as exc:
        return {
            **base,
            "status": "failed",
            "stage": "infrastructure" if isinstance(exc, InfrastructureError) else "config",
            "reason": str(exc),
            "timings": {},
            "seconds": seconds(),
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
            "timings": {},
            "seconds": seconds(),
        }
    result = {
        **base,
        "status": "accepted",
        "timings": {k: round(v, 4) for k, v in state.timings.items()},
        "seconds": seconds(),
    }
    cache.store(job.key, result, state.artifacts)
    return result


def build_release(
    spec: BuildSpec | Path | str,
    dest: Path | str,
    *,
    workers: int = 0,
    cache_dir: Path | str | None = None,
    replace: bool = False,
    ray_address: str | None = None,
    progress: ProgressFn | None = None,
    items: Sequence[SourceItem] | None = None,
) -> BuildReport:
    """Build every item of ``spec`` into a release at ``dest``, going on past bad items.

    Args:
        spec: a ``BuildSpec`` or a spec file.
        dest: the release folder to create.
        workers: Ray workers (CPUs) for a local Ray; 0 builds in this process.
        cache_dir: the item cache (default ``<dest parent>/.build-cache``).
        replace: replace an existing release at ``dest``.
        ray_address: an existing Ray cluster to use instead of a local one.
        progress: called as ``progress(done, total, result)`` after each item.
        items: build these items instead of loading the spec's sources (a
            ``LoadedSource`` also contributes its load rejections and skipped ids).

    Returns:
        The report, also written as ``build_report.json`` next to ``dest``.

    Raises:
        ConfigError: a bad spec or option.
        BuildError: every item was rejected (the report is written first).
        ReleaseError: ``dest`` exists without ``replace``, or a task could not be written
            (a failed write leaves no release folder behind).
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
    stage_context(spec, cache_root)  # fail fast on a bad spec, before any work
    if items is None:
        items, rejected, skipped, t_load = load_items(spec)
    else:
        rejected = list(getattr(items, "rejections", ()))
        skipped = list(getattr(items, "skipped", ()))
        t_load = float(getattr(items, "load_seconds", 0.0))
        items = list(items)
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
    return _write_release(
        spec,
        dest,
        jobs,
        results,
        cache,
        rejected,
        skipped,
        replace=replace,
        workers=workers,
        cached=cached,
        t_load=t_load,
        started=started,
    )


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
    load_rejected: Iterable[Rejection],
    skipped: list[str],
    *,
    replace: bool,
    workers: int,
    cached: int,
    t_load: float,
    started: float,
) -> BuildReport:
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

    def report() -> BuildReport:
        return BuildReport(
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

    with ReleaseWriter(dest, replace=replace, manifest=manifest) as writer:
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


def bundled_spec(**fields: Any) -> BuildSpec:
    """The spec of the embedded demo's release: both bundled corpora, every stage.

    ``fields`` override the spec (``seed``, ``stage3``, ``languages`` ...).
    """
    base = BuildSpec(
        sources=(
            SourceSpec(kind="bundled", path="finance"),
            SourceSpec(kind="bundled", path="clinical"),
        ),
        stage3={},
    )
    return dataclasses.replace(base, **fields)


__all__ = [
    "ItemJob",
    "ProgressFn",
    "build_item",
    "build_release",
    "build_task",
    "bundled_spec",
    "stage_context",
]
