"""The embedded demo: build the bundled corpora, run the gold oracle everywhere, score.

The build runs every builder stage (cross-language transformation with the offline glossary
translator, constraint-aware sampling, routing with documents and videos) in parallel on
Ray, content-addressed, so running the demo again reuses finished items and resumes the run.

Everything runs on one machine: an in-process Ray instance, ``file://`` storage and local
sandboxes. The oracle must score 100% on every task; any attempt it does not pass is a bug
somewhere in the builder, the sandbox, the run loop or the evaluator, and is reported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataspace.limits import Limits

logger = logging.getLogger(__name__)

DEMO_RUN_ID = "demo"
DEMO_LIMITS = Limits(cpus=1.0, memory_bytes=1024**3, tmp_bytes=512 * 1024**2)
"""The demo's sandboxes: the oracle only writes a CSV, so one CPU, 1 GiB and a 512 MiB
``/tmp`` each (the values the demo has always had, so an existing demo folder resumes)."""


@dataclass(frozen=True, kw_only=True)
class DemoOutcome:
    """What the demo did."""

    release_dir: Path
    build_report: Any
    build_seconds: float
    run: Any
    failures: list[Mapping[str, Any]]

    @property
    def ok(self) -> bool:
        """True when the oracle passed every attempt."""
        return not self.failures


def oracle_failures(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The attempts of an oracle run that did not pass (each one a bug).

    >>> oracle_failures([{"task_id": "task_1", "passed": True},
    ...                  {"task_id": "task_2", "passed": None, "status": "not_scheduled"}])
    [{'task_id': 'task_2', 'passed': None, 'status': 'not_scheduled'}]
    """
    return [r for r in rows if r.get("passed") is not True]


def build_demo_release(
    release_dir: Path,
    *,
    workers: int = 2,
    progress: Callable[[int, int, Any], None] | None = None,
    cache_dir: Path | str | None = None,
) -> Any:
    """Build the demo release (the bundled corpora, every stage) at ``release_dir``.

    Args:
        release_dir: the release folder (replaced when it exists).
        workers: Ray workers for the items; 0 builds in this process.
        progress: called as ``(done, total, result)`` after each built item.
        cache_dir: the item cache (default: beside the release); items already built
            there with the same inputs and code are reused, not rebuilt.

    Returns:
        The build report.
    """
    from builder.driver import build_release, bundled_spec

    return build_release(
        bundled_spec(),
        release_dir,
        workers=workers,
        replace=True,
        progress=progress,
        cache_dir=cache_dir,
    )


def run_demo(
    out: Path,
    *,
    concurrency: int | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    build_progress: Callable[[int, int, Any], None] | None = None,
    protocol: str = "official",
    build_cache: Path | str | None = None,
    backend: str | None = None,
) -> DemoOutcome:
    """Build ``out/release`` from the bundled corpora and run ``gold`` into ``out/store``.

    Args:
        out: the output folder.
        concurrency: attempts (and item builds) at once; None: the run spec's default.
        progress: the run's progress callback (see ``execute_run``).
        build_progress: called as ``(done, total, result)`` after each built item.
        protocol: the run's protocol profile (``official`` or ``extended``).
        build_cache: the build's item cache (default ``out/.build-cache``).
        backend: the sandbox backend of the attempts (default: a run spec's, ``local``);
            another backend's run is ``demo-<backend>``, so one folder holds both.
    """
    from dataspace.report.basic import write_finished_page
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, RunSpec, SandboxConfig
    from dataspace.sandbox import DEFAULT_BACKEND

    backend = backend or DEFAULT_BACKEND

    workers = max(1, RunSpec.concurrency if concurrency is None else int(concurrency))
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    release_dir = out / "release"
    report = build_demo_release(
        release_dir, workers=workers, progress=build_progress, cache_dir=build_cache
    )
    build_seconds = time.monotonic() - t0
    spec = RunSpec(
        run_id=DEMO_RUN_ID if backend == DEFAULT_BACKEND else f"{DEMO_RUN_ID}-{backend}",
        release=str(release_dir),
        store=f"file://{out / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=DEMO_LIMITS,
        sandbox=SandboxConfig(backend=backend),
        concurrency=workers,
        protocol=protocol,
    )
    run = execute_run(spec, progress=progress, on_finished=write_finished_page)
    return DemoOutcome(
        release_dir=release_dir,
        build_report=report,
        build_seconds=build_seconds,
        run=run,
        failures=oracle_failures(run.rows),
    )


__all__ = [
    "DEMO_LIMITS",
    "DEMO_RUN_ID",
    "DemoOutcome",
    "build_demo_release",
    "oracle_failures",
    "run_demo",
]
