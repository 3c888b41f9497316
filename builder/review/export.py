"""Export the accepted tasks as a release in the official layout, with the review record."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.review.protocol import TaskFold
from builder.review.service import ReviewService
from builder.review.stats import review_stats
from builder.review.taxonomy import TaskState

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ExportReport:
    """What ``review export`` wrote.

    Attributes:
        out: the release folder.
        tasks: task id -> exported version.
        left_out: task id -> its state (every task that is not accepted).
    """

    out: Path
    tasks: dict[str, int]
    left_out: dict[str, str]


def _review_record(svc: ReviewService, fold: TaskFold) -> dict[str, Any]:
    return {
        "schema_version": "1.0",
        "task_id": fold.task_id,
        "final_version": fold.version,
        "decision": fold.decision,
        "reviewers": list(fold.reviewers),
        "versions": [
            {
                "version": v.number,
                "scope": list(v.scope),
                "reason": v.reason,
                "repaired_by": v.repaired_by,
                "question": v.question,
                "gold_sha256": v.gold_sha256,
                "overlay": v.overlay,
            }
            for v in fold.versions.values()
        ],
        "records": {
            str(v): {
                name: {
                    "phase1": r.phase1,
                    "phase1_at": r.phase1_at,
                    "phase2": r.phase2,
                    "phase2_at": r.phase2_at,
                }
                for name, r in recs.items()
            }
            for v, recs in sorted(fold.records.items())
        },
        "discussion": fold.messages,
        "events": [e.to_dict() for e in svc.events(fold.task_id)],
    }


def export_release(svc: ReviewService, out: Path, *, replace: bool = False) -> ExportReport:
    """Write every accepted task (final version, agreed config) as a release.

    Task ids are kept. The workspace is the final version's (base files with overlays
    applied); ``metadata/task_N.json`` gains ``review`` (version, repairs) and the ledger
    ``review.json`` (the task's whole record and events).

    Raises:
        ReleaseError: nothing is accepted, or the release cannot be written.
    """
    import evaluator
    from dataspace.release import ReleaseWriter, TaskArtifacts

    base = svc.release
    exported: dict[str, int] = {}
    left_out: dict[str, str] = {}
    folds = {tid: svc.fold(tid) for tid in svc.task_ids()}
    stats = review_stats(svc.events())
    manifest = {
        "name": f"{base.root.name}-reviewed",
        "review": {"source_release": str(base.root), "acceptance": stats["acceptance"]},
    }
    with ReleaseWriter(out, replace=replace, manifest=manifest) as writer:
        for tid, fold in folds.items():
            if fold.state != TaskState.ACCEPTED or fold.decision is None:
                left_out[tid] = str(fold.state)
                continue
            version = fold.current
            gold = svc.db.get_blob(version.gold_sha256)
            assert gold is not None
            config = dict(fold.decision["config"])
            table = evaluator.read_csv(gold, role="gold")
            metadata = dict(base.metadata(tid) or {})
            metadata.update(
                {
                    "answer_rows": len(table.rows),
                    "answer_columns": len(table.header),
                    "order_sensitive": bool(config["order_sensitive"]),
                    "review": {
                        "version": version.number,
                        "repairs": [
                            {"version": v.number, "scope": list(v.scope), "reason": v.reason}
                            for v in fold.versions.values()
                            if v.number > 1
                        ],
                        "reviewers": len(fold.reviewers),
                    },
                }
            )
            ledger = dict(base.ledger(tid) or {})
            ledger_files: dict[str, bytes | Path] = {}
            ldir = base.ledger_dir(tid)
            if ldir.is_dir():
                for p in sorted(ldir.rglob("*")):
                    if p.is_file() and not p.is_symlink() and p.name != "ledger.json":
                        ledger_files[p.relative_to(ldir).as_posix()] = p
            if ledger:
                if ledger.get("gold_sha256") != hashlib.sha256(gold).hexdigest():
                    ledger["gold_repaired_in_review"] = True
                ledger["gold_sha256"] = hashlib.sha256(gold).hexdigest()
                ledger["review_version"] = version.number
            record = _review_record(svc, fold)
            ledger_files["review.json"] = (
                json.dumps(record, ensure_ascii=False, indent=2, default=str) + "\n"
            ).encode("utf-8")
            extra = {
                k: v for k, v in base.task(tid).raw.items() if k not in ("task_id", "question")
            }
            writer.add_task(
                TaskArtifacts(
                    task_id=tid,
                    question=version.question,
                    context=svc.files(fold).contents(),
                    gold_csv=gold,
                    config=config,
                    metadata=metadata,
                    ledger=ledger,
                    ledger_files=ledger_files,
                    task_extra=extra,
                )
            )
            exported[tid] = version.number
    return ExportReport(out=Path(out).resolve(), tasks=exported, left_out=left_out)


__all__ = ["ExportReport", "export_release"]
