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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DEMO_RUN_ID = "demo"
VIDEO_SHARE = 0.3  # share of demo tasks whose evidence is moved into a data video


@dataclass(frozen=True, kw_only=True)
class DemoOutcome:
    """What the demo did."""

    release_dir: Path
    build_report: Any
    build_seconds: float
    run: Any
    failures: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        """True when the oracle passed every attempt."""
        return not self.failures


def oracle_failures(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
) -> Any:
    """Build the demo release (the bundled corpora, every stage) at ``release_dir``.

    Args:
        release_dir: the release folder (replaced when it exists).
        workers: Ray workers for the items; 0 builds in this process.
        progress: called as ``(done, total, result)`` after each built item.

    Returns:
        The build report.
    """
    from builder.parallel import BuildSpec, SourceSpec, build_parallel

    build = BuildSpec(
        sources=(
            SourceSpec(kind="bundled", path="finance"),
            SourceSpec(kind="bundled", path="clinical"),
        ),
        stage3={"video_share": VIDEO_SHARE},
    )
    return build_parallel(build, release_dir, workers=workers, replace=True, progress=progress)


def run_demo(
    out: Path,
    *,
    concurrency: int = 2,
    progress: Callable[[dict[str, Any]], None] | None = None,
    build_progress: Callable[[int, int, Any], None] | None = None,
    protocol: str = "official",
) -> DemoOutcome:
    """Build ``out/release`` from the bundled corpora and run ``gold`` into ``out/store``.

    Args:
        out: the output folder.
        concurrency: attempts (and item builds) at once.
        progress: the run's progress callback (see ``execute_run``).
        build_progress: called as ``(done, total, result)`` after each built item.
        protocol: the run's protocol profile (``official`` or ``extended``).
    """
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, RunSpec, SandboxConfig

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    release_dir = out / "release"
    report = build_demo_release(release_dir, workers=max(1, concurrency), progress=build_progress)
    build_seconds = time.monotonic() - t0
    spec = RunSpec(
        run_id=DEMO_RUN_ID,
        release=str(release_dir),
        store=f"file://{out / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        sandbox=SandboxConfig(backend="local", cpus=1.0, memory_bytes=1024**3),
        concurrency=max(1, concurrency),
        protocol=protocol,
    )
    run = execute_run(spec, progress=progress)
    return DemoOutcome(
        release_dir=release_dir,
        build_report=report,
        build_seconds=build_seconds,
        run=run,
        failures=oracle_failures(run.rows),
    )


__all__ = [
    "DEMO_RUN_ID",
    "VIDEO_SHARE",
    "DemoOutcome",
    "build_demo_release",
    "oracle_failures",
    "run_demo",
]
