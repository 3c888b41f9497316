"""The build report: what was accepted (with task ids), what was rejected and why, timings.

``builder.driver.build_release`` writes it as ``build_report.json`` next to the release
folder. Wall times live here, never in a task's ledger.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.sources.base import Rejection

logger = logging.getLogger(__name__)

REPORT_SCHEMA_VERSION = "1.0"
REPORT_NAME = "build_report.json"


@dataclass(frozen=True, kw_only=True)
class AcceptedItem:
    """A source item that became a task."""

    corpus: str
    id: str
    task_id: str


@dataclass(frozen=True, kw_only=True)
class BuildReport:
    """What a build did: every item accepted (with its task id) or rejected (with why).

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
        video: the video composition (None when the build makes no videos): the share
            asked for and reached, tasks with a video, their median length, how many items
            tried, how many got one, how many were built again without one to meet the
            share, and how often each strategy declined and why.
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
    video: Mapping[str, Any] | None = None

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
        """A JSON-ready dict (what ``build_report.json`` holds)."""
        langs: dict[str, int] = {}
        for it in self.items:
            if it.get("status") == "accepted":
                key = f"database={it['languages'][0]},question={it['languages'][1]}"
                langs[key] = langs.get(key, 0) + 1
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
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
            "video": None if self.video is None else dict(self.video),
            "items": [dict(i) for i in self.items],
        }

    def write(self, path: Path) -> None:
        """Write the report as JSON (temp file + rename)."""
        write_report_json(path, self.to_json())


def write_report_json(path: Path, obj: Mapping[str, Any]) -> None:
    """Write a build report as JSON atomically (temp file in the same folder + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def nothing_built(report: Any, dest: Path, rejected: int) -> Exception:
    """Write the report of a build that accepted no item and return the error to raise.

    Raised inside the release writer, the error also removes the partial (empty) release.
    """
    from builder.errors import BuildError

    report.write(dest.parent / REPORT_NAME)
    return BuildError(
        str(dest), "build", f"all {rejected} items were rejected; see {dest.parent / REPORT_NAME}"
    )


class StageTimer:
    """Sums the seconds spent in each named stage."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        """Time the enclosed block as ``stage``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.totals[stage] = self.totals.get(stage, 0.0) + time.perf_counter() - started

    def add(self, stage: str, seconds: float) -> None:
        """Add seconds measured elsewhere."""
        self.totals[stage] = self.totals.get(stage, 0.0) + seconds


_TIMING_KEYS = ("timings", "seconds")


def pop_timings(obj: Any, prefix: str = "") -> dict[str, float]:
    """Remove every wall-time record from a ledger-like tree; return them flattened.

    Wall times differ between two builds of the same input, so they belong in the build
    report, never in ``ledger.json`` (which must be byte-identical across builds).

    >>> ledger = {"transform": {"timings": {"sql_s": 0.5}, "sql": "x"},
    ...           "video": {"seconds": {"plan": 0.1}, "duration": 3.0}}
    >>> pop_timings(ledger)
    {'transform.sql_s': 0.5, 'video.plan': 0.1}
    >>> ledger
    {'transform': {'sql': 'x'}, 'video': {'duration': 3.0}}
    """
    out: dict[str, float] = {}
    if isinstance(obj, dict):
        for key in list(obj):
            value = obj[key]
            if (
                key in _TIMING_KEYS
                and isinstance(value, dict)
                and all(isinstance(v, int | float) for v in value.values())
            ):
                for name, secs in obj.pop(key).items():
                    out[f"{prefix}{name}"] = out.get(f"{prefix}{name}", 0.0) + float(secs)
            else:
                for name, secs in pop_timings(value, f"{prefix}{key}.").items():
                    out[name] = out.get(name, 0.0) + secs
    elif isinstance(obj, list):
        for value in obj:  # summed over the list's entries
            for name, secs in pop_timings(value, prefix).items():
                out[name] = out.get(name, 0.0) + secs
    return out


__all__ = [
    "REPORT_NAME",
    "AcceptedItem",
    "BuildReport",
    "StageTimer",
    "nothing_built",
    "pop_timings",
    "write_report_json",
]
