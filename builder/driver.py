"""The one build driver: every item of a spec through the stages, in process or on Ray.

Per item: choose its languages (seeded, ``LanguagePlan``), look it up in the item cache
(``builder.cache``), and otherwise run it through ``builder.stages.STAGES``. Items run in
this process (``workers=0``) or as Ray tasks (a local ``ray.init()`` unless an address is
given); either way each item is built by ``build_item``, which stores its result in the
cache and never raises for a bad item. The release is then written with ``ReleaseWriter``
(``task_1..task_N`` in source order) and the build report (every rejected item with its
stage and reason, timings per stage) beside it.

**Video share.** ``Stage3Options.video_share`` is the share of the release's tasks that
hold a video. Every item first tries for one (its strategies decline about half of the
tries); when more tasks got a video than the share asks for, a seeded choice of them is
built again with the video off (``ItemJob.video``), so the release holds the share
exactly, rounded to whole tasks. Fewer videos than asked is reported, never padded.

**Videos planned first.** Encoding is most of a video's cost, so the first pass plans each
item's video without encoding it (``ItemJob.defer_video``: the item goes through every
stage and is cached with its plan). The share is chosen from the planned videos; only
the videos the release keeps are then encoded and checked (``finish_video_item``). A kept
video that fails its encoding or check sends its item through every stage again the
direct way (the next strategy, or no video, as a direct build does) and the share is
chosen again, until every kept video is encoded. A video dropped to meet the share is
never encoded: the choice counts it as made, which is what a direct build finds unless
that video would have failed its check (no check has failed on the bundled corpora or
the MIMIC split).
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

from builder.cache import PENDING_VIDEO, ItemCache, code_version, item_key, pack_plan
from builder.errors import BuildError
from builder.report import REPORT_NAME, AcceptedItem, BuildReport, nothing_built
from builder.sources.base import Rejection, SourceItem, one_line
from builder.spec import BuildSpec, SourceSpec, load_items
from builder.stages import STAGES, StageContext, cpu_seconds, initial_state, run_stages
from builder.stages.state import need
from dataspace.errors import ConfigError, InfrastructureError

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
    video: bool = True
    defer_video: bool = False


def build_item(job: ItemJob) -> dict[str, Any]:
    """Build one item and store it in the cache; never raises for a bad item.

    Returns:
        ``{"key", "status", "stage", "reason", "timings", "languages", ...}``; ``status``
        is ``accepted``, ``rejected`` (cached) or ``failed`` (infrastructure, not cached).
        ``seconds`` and ``cpu_seconds`` are the item's wall and CPU time (child processes
        included); an accepted item's ``cpu`` holds the CPU seconds of each stage. An
        accepted item whose video is planned, not encoded (``job.defer_video``), has
        ``video_pending`` (its workspace size without the video).
    """
    started, cpu = time.perf_counter(), cpu_seconds()
    cache = ItemCache(Path(job.cache_root))
    base = {
        "key": job.key,
        "languages": list(job.languages),
        "corpus": job.item.corpus,
        "id": job.item.id,
    }

    def seconds() -> float:
        return round(time.perf_counter() - started, 4)

    def spent() -> float:
        return round(cpu_seconds() - cpu, 4)

    try:
        ctx = stage_context(job.spec, job.cache_root)
        state = initial_state(
            job.item,
            languages=job.languages,
            build_seed=job.spec.seed,
            video=job.video,
            defer_video=job.defer_video,
        )
        state = run_stages(state, ctx, STAGES)
    except BuildError as exc:
        result = {
            **base,
            "status": "rejected",
            "stage": exc.stage,
            "reason": one_line(exc.reason),
            "timings": {},
            "seconds": seconds(),
            "cpu_seconds": spent(),
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
            "cpu_seconds": spent(),
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
            "cpu_seconds": spent(),
        }
    made = state.video
    result = {
        **base,
        "status": "accepted",
        "video": {"strategy": made.strategy, "duration": round(made.duration, 3)}
        if made is not None
        else None,
        "video_declined": list(state.video_skipped),
        "timings": {k: round(v, 4) for k, v in state.timings.items()},
        "cpu": {k: round(v, 4) for k, v in state.cpu.items()},
        "seconds": seconds(),
        "cpu_seconds": spent(),
    }
    files = None
    if made is not None and made.pending is not None:
        art = need(state.artifacts, "task", "driver")
        result["video_pending"] = {"workspace_bytes": art.metadata["workspace_bytes"]}
        files = {PENDING_VIDEO: pack_plan(made.pending)}
    cache.store(job.key, result, state.artifacts, files)
    return result


def finish_video_item(job: ItemJob) -> dict[str, Any]:
    """Encode and check the planned video of a cached item, completing its entry.

    A video that fails its encoding or check (or a plan that cannot be read) sends the item
    through every stage again without deferring its video (``build_item``), as a direct
    build would have; like ``build_item`` it never raises for a bad item.

    Returns:
        The item's result as ``build_item`` gives it: its ``timings`` and ``cpu`` cover
        the first pass and the encoding (``finished_video`` holds the encoding's part).
    """
    from builder.render.video import VideoRejected, encode_pending

    started, cpu = time.perf_counter(), cpu_seconds()
    cache = ItemCache(Path(job.cache_root))
    first = cache.result(job.key) or {}
    try:
        encoded = encode_pending(cache.pending_video(job.key))
        video, check = encoded.video, encoded.check.to_json()
    except Exception as exc:  # a failed check, or a plan that cannot be read: the direct way
        level = logging.INFO if isinstance(exc, VideoRejected) else logging.WARNING
        logger.log(
            level, "item %s/%s: planned video not kept (%s)", job.item.corpus, job.item.id, exc
        )
        cache.discard(job.key)
        return build_item(dataclasses.replace(job, defer_video=False))
    used, wall = cpu_seconds() - cpu, time.perf_counter() - started
    timings = dict(first.get("timings") or {})
    steps = {"video": wall, **{f"stage3.video.{k}": v for k, v in encoded.seconds.items()}}
    for name, secs in steps.items():
        timings[name] = round(timings.get(name, 0.0) + secs, 4)
    cpus = dict(first.get("cpu") or {})
    cpus["video"] = round(cpus.get("video", 0.0) + used, 4)
    result = {
        **first,
        "timings": timings,
        "cpu": cpus,
        "seconds": round(float(first.get("seconds") or 0.0) + wall, 4),
        "cpu_seconds": round(float(first.get("cpu_seconds") or 0.0) + used, 4),
        "finished_video": {"seconds": round(wall, 4), "cpu_seconds": round(used, 4)},
    }
    cache.complete_video(job.key, result, video=video, check=check)
    result.pop("video_pending", None)
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
    jobs = [
        ItemJob(
            item=item,
            languages=(langs := spec.languages.choose(item, spec.seed)),
            key=item_key(item, langs, spec),
            spec=spec,
            cache_root=str(cache_root),
            defer_video=True,
        )
        for item in items
    ]
    results: dict[str, dict[str, Any]] = {}
    counter = {"done": 0, "total": len(jobs)}

    def record(res: dict[str, Any]) -> None:
        results[res["key"]] = {**res, "cached": False}
        counter["done"] += 1
        if progress is not None:
            progress(counter["done"], counter["total"], res)

    runner = _Runner(workers, ray_address)
    try:
        _build_jobs(jobs, cache, results, counter, record, runner, progress)
        while True:  # encode the kept videos; a failed one changes the choice
            chosen, video = _meet_video_share(spec, jobs, results)
            kept = [j for j in chosen if results.get(j.key, {}).get("video_pending")]
            if not kept:
                break
            counter["total"] += len(kept)
            runner.run(kept, record, finish_video_item)
        jobs = chosen
        if video.get("drop"):
            counter["total"] += len(video["drop"])
            _build_jobs(
                [j for j in jobs if j.key in video["drop"]],
                cache,
                results,
                counter,
                record,
                runner,
                progress,
            )
    finally:
        runner.close()
    # per item of the release: an item built again without its video counts once
    cached = sum(1 for j in jobs if results[j.key].get("cached"))
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
        video_share=video,
    )


class _Runner:
    """Builds jobs in this process (``workers`` 0) or on Ray, connected once per build."""

    def __init__(self, workers: int, address: str | None) -> None:
        self.workers = workers
        self.address = address
        self._ray_started: bool | None = None

    def run(
        self,
        jobs: Sequence[ItemJob],
        record: Callable[[dict[str, Any]], None],
        fn: Callable[[ItemJob], dict[str, Any]] = build_item,
    ) -> None:
        if self.workers <= 0:
            for job in jobs:
                record(fn(job))
            return
        if self._ray_started is None:
            from dataspace.runs.ray_start import connect_ray

            self._ray_started = connect_ray(address=self.address, num_cpus=self.workers)
        _run_ray(jobs, record, fn)

    def close(self) -> None:
        if self._ray_started:
            import ray

            ray.shutdown()


def _build_jobs(
    jobs: Sequence[ItemJob],
    cache: ItemCache,
    results: dict[str, dict[str, Any]],
    counter: dict[str, int],
    record: Callable[[dict[str, Any]], None],
    runner: _Runner,
    progress: ProgressFn | None,
) -> None:
    """Take what the cache holds, build the rest."""
    hits = 0
    for job in jobs:
        hit = cache.result(job.key)
        if hit is not None and (
            hit.get("status") != "accepted" or (cache.folder(job.key) / "artifacts.json").is_file()
        ):
            results[job.key] = {**hit, "cached": True}
            hits += 1
    counter["done"] += hits
    if progress is not None and hits:
        progress(counter["done"], counter["total"], {"status": "cached", "count": hits})
    todo = [j for j in jobs if j.key not in results]
    if todo:
        runner.run(todo, record)


def _meet_video_share(
    spec: BuildSpec, jobs: list[ItemJob], results: Mapping[str, Mapping[str, Any]]
) -> tuple[list[ItemJob], dict[str, Any]]:
    """The jobs with a seeded choice of video tasks turned off, and the video summary.

    Tasks that got a video beyond ``round(video_share x accepted)`` are dropped, highest
    seeded draw first (items whose video is forced are never dropped). Returns the jobs
    (dropped ones with their video-off key) and ``{"target_share", "drop": {keys}}``;
    an empty mapping when the build makes no videos.
    """
    from builder.semantics import draw

    opts = spec.stage3_options()
    if opts is None or opts.video is None:
        return jobs, {}
    accepted = [j for j in jobs if results.get(j.key, {}).get("status") == "accepted"]
    with_video = [j for j in accepted if results[j.key].get("video")]
    target = round(opts.video_share * len(accepted))
    droppable = [j for j in with_video if j.item.id not in opts.forced]
    droppable.sort(key=lambda j: (-draw(spec.seed, f"video\0{j.item.corpus}\0{j.item.id}"), j.key))
    dropping = {j.key for j in droppable[: max(0, len(with_video) - target)]}
    out: list[ItemJob] = []
    drop: set[str] = set()
    for job in jobs:
        if job.key in dropping:
            job = dataclasses.replace(
                job, video=False, key=item_key(job.item, job.languages, spec, video=False)
            )
            drop.add(job.key)
        out.append(job)
    declined: dict[str, dict[str, int]] = {}
    for job in accepted:
        for entry in results[job.key].get("video_declined") or ():
            strategy, _, reason = str(entry).partition(": ")
            folded = _fold_reason(reason)
            declined.setdefault(strategy, {})
            declined[strategy][folded] = declined[strategy].get(folded, 0) + 1
    summary = {
        "target_share": opts.video_share,
        "tried": len(accepted),
        "made": len(with_video),
        "declined": declined,
        "dropped_to_meet_share": len(drop),
        "drop": drop,
    }
    return out, summary


def _fold_reason(reason: str) -> str:
    """A reason with its details (numbers, quoted values, bracketed lists) folded.

    >>> _fold_reason("the answer (5x2) is not compact enough; 'x' leaks")
    "the answer is not compact enough; '…' leaks"
    """
    import re

    reason = re.sub(r"\s*\([^()]*\)", "", re.sub(r"'[^']*'", "'…'", reason))
    return re.sub(r"\d+", "N", reason)


def _run_ray(
    jobs: Sequence[ItemJob],
    record: Callable[[dict[str, Any]], None],
    fn: Callable[[ItemJob], dict[str, Any]],
) -> None:
    import ray
    from ray.exceptions import RayError, RayTaskError

    remote = ray.remote(num_cpus=1, max_retries=1)(fn)
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
    video_share: Mapping[str, Any],
) -> BuildReport:
    import statistics

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
            video=video_summary(),
        )

    def video_summary() -> dict[str, Any] | None:
        if not video_share:
            return None
        lengths = [
            float(results[j.key]["video"]["duration"])
            for j in jobs
            if results.get(j.key, {}).get("status") == "accepted" and results[j.key].get("video")
        ]
        tasks = len(accepted)
        return {
            "target_share": video_share["target_share"],
            "share": round(len(lengths) / tasks, 4) if tasks else 0.0,
            "tasks_with_video": len(lengths),
            "tasks": tasks,
            "median_seconds": round(statistics.median(lengths), 2) if lengths else None,
            "tried": video_share["tried"],
            "made": video_share["made"],
            "dropped_to_meet_share": video_share["dropped_to_meet_share"],
            "declined": video_share["declined"],
        }

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
    "finish_video_item",
    "stage_context",
]
