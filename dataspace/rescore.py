"""Re-scoring a finished run without calling any model: ``dataspace rescore RUN``.

Every submitted prediction the run kept (``attempts/<agent>/<task>/<n>/output/
prediction.csv``) is scored again with the evaluator installed now and the release's
configs and gold now (a repaired config, a fixed evaluator). The run's own results are
never touched; the new version goes beside them::

    runs/<id>/rescore-<N>/results.parquet   the results, rescored (same columns)
    runs/<id>/rescore-<N>/rescore.json      what was used and what changed

``N`` counts up from 1. An attempt that submitted nothing is scored as the attempt runner
scored it (``missing_prediction``); attempts never scheduled, ended by an infrastructure
failure, or on a task whose gold the release hides keep their rows as they are.
``dataspace report runs/<id>/rescore-<N>`` builds the report of the new version.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError, DataSpaceError, NotFoundError

logger = logging.getLogger(__name__)

UNSCORED_STATUSES = frozenset({"not_scheduled", "infrastructure_error"})
PREDICTION = "prediction.csv"


@dataclass(frozen=True, kw_only=True)
class Change:
    """One attempt whose verdict changed."""

    agent: str
    task_id: str
    attempt: int
    old_passed: bool | None
    new_passed: bool | None
    old_code: str | None
    new_code: str | None

    def line(self) -> str:
        """One line for the screen.

        >>> Change(agent="a", task_id="task_1", attempt=1, old_passed=False, new_passed=True,
        ...        old_code="relation_mismatch", new_code=None).line()
        'a task_1 attempt 1: incorrect (relation_mismatch) -> correct'
        """

        def word(passed: bool | None, code: str | None) -> str:
            if passed is None:
                return "unscored"
            return "correct" if passed else f"incorrect ({code})"

        return (
            f"{self.agent} {self.task_id} attempt {self.attempt}: "
            f"{word(self.old_passed, self.old_code)} -> {word(self.new_passed, self.new_code)}"
        )


@dataclass(frozen=True, kw_only=True)
class RescoreOutcome:
    """What ``rescore`` did.

    Attributes:
        version: the ``N`` of ``rescore-<N>``.
        results: URI of the new results file.
        rescored: attempts scored again.
        kept: attempts whose rows were kept as they were (see the module docstring).
        changes: attempts whose verdict or error code changed.
        problems: attempts that could not be rescored (their rows were kept), one line each.
    """

    version: int
    results: str
    rescored: int
    kept: int
    changes: tuple[Change, ...]
    problems: tuple[str, ...] = ()


def _release_root(source: Any, release: str | None) -> str:
    if release:
        return release
    try:
        doc = json.loads(source.store.get_bytes(source.key("spec.json")))
    except NotFoundError:
        raise ConfigError(
            f"{source.store.url_for(source.key('spec.json'))}: no spec.json, so the run's "
            "release is unknown; pass --release DIR"
        ) from None
    root = (doc.get("spec") or {}).get("release")
    if not root:
        raise ConfigError("spec.json names no release; pass --release DIR")
    return str(root)


def _next_version(source: Any) -> int:
    n = 0
    for key in source.store.list(source.key("")):
        rel = key[len(source.key("")) :] if source.prefix.strip("/") else key
        head = rel.split("/", 1)[0]
        if head.startswith("rescore-") and head[len("rescore-") :].isdigit():
            n = max(n, int(head[len("rescore-") :]))
    return n + 1


def _score(release: Any, row: Mapping[str, Any], prediction: bytes | None) -> dict[str, Any]:
    import evaluator

    task = str(row["task_id"])
    config = release.config(task)
    with tempfile.TemporaryDirectory(prefix="ds-rescore-") as tmp:
        pred = Path(tmp) / PREDICTION  # absent -> missing_prediction
        if prediction is not None:
            pred.write_bytes(prediction)
        verdict = evaluator.evaluate_task(
            task_id=task, prediction_path=pred, gold_path=release.gold_path(task), config=config
        )
        out = verdict.to_dict()
        out["explanation"] = evaluator.explain_files(
            prediction_path=pred, gold_path=release.gold_path(task), config=config, verdict=verdict
        )
    return out


def rescore(run: str, *, release: str | None = None) -> RescoreOutcome:
    """Score a run's stored predictions again and write the new results beside the old.

    Args:
        run: the run folder (path or store URI, ``<store>/runs/<id>``).
        release: the release whose configs and gold to use (default: the run's, from
            ``spec.json``).

    Raises:
        ConfigError: no readable results, no release, or a release that does not check.
    """
    import evaluator
    from dataspace.release import Release
    from dataspace.report.load import open_run
    from dataspace.runs.results import rows_to_parquet
    from dataspace.runs.results_log import load_results

    source = open_run(run)
    try:
        df = load_results(source.store, source.prefix)
    except NotFoundError:
        raise ConfigError(
            f"{source.store.url_for(source.key('results.parquet'))}: no results file; give "
            "a finished run folder (<store>/runs/<id>)"
        ) from None
    root = _release_root(source, release)
    if "://" in root:  # a store URI (s3://...): synced into the release cache, as `run` does
        from dataspace.runs.resolve import default_release_cache, local_release

        root = local_release(root, cache=default_release_cache())
    try:
        rel = Release(root)
    except DataSpaceError as exc:
        raise ConfigError(f"release {root}: {exc}") from exc
    from dataspace.report.page import is_missing

    rows: list[dict[str, Any]] = []
    changes: list[Change] = []
    problems: list[str] = []
    rescored = kept = 0
    for rec in df.to_dict("records"):
        row = {
            k: (None if not isinstance(v, dict | list) and is_missing(v) else v)
            for k, v in rec.items()
        }
        task = str(row["task_id"])
        if row.get("status") in UNSCORED_STATUSES or not rel.has_gold(task):
            rows.append(row)
            kept += 1
            continue
        n = int(row["attempt"] or 1)
        folder = f"attempts/{row['agent']}/{task}/{n}"
        prediction = None
        if row.get("status") == "submitted":
            try:
                prediction = bytes(
                    source.store.get_bytes(source.key(f"{folder}/output/{PREDICTION}"))
                )
            except NotFoundError:
                prediction = None
        try:
            verdict = _score(rel, row, prediction)
        except (evaluator.FatalError, DataSpaceError, OSError) as exc:
            problems.append(f"{row['agent']} {task} attempt {n}: {exc}")
            rows.append(row)
            kept += 1
            continue
        old_passed, old_code = row.get("passed"), row.get("error_code")
        row["verdict"] = verdict
        row["passed"] = bool(verdict["passed"])
        row["error_code"] = verdict.get("error_code")
        rescored += 1
        if (old_passed, old_code) != (row["passed"], row["error_code"]):
            changes.append(
                Change(
                    agent=str(row["agent"]),
                    task_id=task,
                    attempt=n,
                    old_passed=None if old_passed is None else bool(old_passed),
                    new_passed=row["passed"],
                    old_code=old_code,
                    new_code=row["error_code"],
                )
            )
        rows.append(row)
    version = _next_version(source)
    base = f"rescore-{version}"
    source.store.put_bytes(source.key(f"{base}/results.parquet"), rows_to_parquet(rows))
    doc = {
        "schema_version": "1.0",
        "version": version,
        "rescored_at": time.time(),
        "release": str(rel.root),
        "release_fingerprint": rel.fingerprint(),
        "evaluator": evaluator.EVALUATOR_NAME,
        "evaluator_version": evaluator.EVALUATOR_VERSION,
        "rescored": rescored,
        "kept": kept,
        "changes": [c.__dict__ for c in changes],
        "problems": problems,
    }
    source.store.put_bytes(
        source.key(f"{base}/rescore.json"), json.dumps(doc, indent=1, default=str).encode()
    )
    return RescoreOutcome(
        version=version,
        results=source.store.url_for(source.key(f"{base}/results.parquet")),
        rescored=rescored,
        kept=kept,
        changes=tuple(changes),
        problems=tuple(problems),
    )


__all__ = ["Change", "RescoreOutcome", "rescore"]
