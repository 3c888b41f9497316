"""The task's metadata and ledger, and the finished task artifacts.

The ledger records provenance (source, languages, seeds, the task database and its
sampling, routing, the video, stage 1's record) and never wall times: those are taken out
into the state's timings (the build report), so two builds of the same input write
byte-identical ledgers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from builder.stages.state import StageContext, TaskState, need

logger = logging.getLogger(__name__)

LEDGER_SCHEMA_VERSION = "1.0"


def ledger(state: TaskState, ctx: StageContext) -> TaskState:
    """Assemble the task: question, workspace files, gold, config, metadata and ledger."""
    from builder.metadata import task_metadata
    from builder.report import pop_timings
    from dataspace.release import TaskArtifacts

    taskdb = need(state.taskdb, "task database", "ledger")
    answer = need(state.answer, "gold answer", "ledger")
    ws = need(state.workspace, "workspace", "ledger")
    cfg = need(state.config, "evaluation config", "ledger")
    item, made = state.item, state.video
    files = dict(ws.files)
    question = item.question
    if made is not None:
        files[made.filename] = made.video
        question = made.question
    metadata = task_metadata(
        item,
        task_id=state.task_id,
        sql=item.sql,
        workspace=ws,
        answer=answer,
        workspace_language=state.workspace_language,
        video=made,
        question_before_video=item.question,
    )
    record = _ledger(state, ctx)
    timings = dict(state.timings)
    for name, secs in pop_timings(record).items():
        timings[name] = timings.get(name, 0.0) + secs
    ledger_files: dict[str, bytes] = {"task_db.sqlite": taskdb.database.data}
    for key, doc in ws.documents.items():
        ledger_files[f"documents/{key.replace('/', '.')}.manifest.json"] = json.dumps(
            doc.manifest.to_json(), ensure_ascii=False
        ).encode("utf-8")
    artifacts = TaskArtifacts(
        task_id=state.task_id,
        question=question,
        context=files,
        gold_csv=answer.csv,
        config=cfg,
        metadata=metadata,
        ledger=record,
        ledger_files=ledger_files,
    )
    return dataclasses.replace(state, artifacts=artifacts, timings=timings)


def _ledger(state: TaskState, ctx: StageContext) -> dict[str, Any]:
    taskdb = need(state.taskdb, "task database", "ledger")
    answer = need(state.answer, "gold answer", "ledger")
    ws = need(state.workspace, "workspace", "ledger")
    routing = need(state.routing, "routing", "ledger")
    src, item, db = state.source, state.item, taskdb.database
    info = dict(db.info)
    sampling = info.pop("sampling", None)
    out: dict[str, Any] = {
        "schema_version": LEDGER_SCHEMA_VERSION,
        "source": {
            "corpus": src.corpus,
            "id": src.id,
            "db_id": item.db_id,
            "question": src.question,
            "sql": src.extra.get("sql_original", src.sql),
            "sql_normalized": src.sql,
            "languages": {"question": src.question_language, "database": src.db_language},
        },
        "sql": item.sql,
        "dialect_fixes": list(item.extra.get("dialect_fixes", [])),
        "languages": {
            "question": item.question_language,
            "workspace": state.workspace_language,
            "database": item.db_language,
        },
        "seed": state.seed,
        "build_seed": state.build_seed,
        "task_db": {
            "file": "task_db.sqlite",
            "step": db.step,
            "sha256": db.sha256,
            "bytes": len(db.data),
            **info,
        },
        "task_db_sha256": db.sha256,
        "row_counts": {t.name: t.row_count for t in taskdb.tables},
        "renderers": list(ctx.spec.renderers),
        "routing": {
            t: {
                "renderer": ws.carrier(t),
                "path": next(r.path for r in rs if r.renderer == ws.carrier(t)),
                "renderers": [r.renderer for r in rs],
                "fallbacks": [f for r in rs for f in r.fallbacks],
            }
            for t, rs in sorted(ws.routes.items())
        },
        "gold_sha256": answer.sha256,
        "answer": {
            "rows": len(answer.rows),
            "columns": len(answer.header),
            "header": list(answer.header),
        },
        "semantics": dict(state.stated),
    }
    if ctx.stage3 is not None:
        from builder.stages.video import workspace_language

        made = state.video
        out["stage3"] = {
            "routing": routing.to_json(),
            "workspace": ws.ledger(),
            "counters_after": dict(ws.counters),
            "language": workspace_language(state.workspace_language, taskdb.tables),
            "video": made.ledger()
            if made is not None
            else ({"skipped": list(state.video_skipped)} if state.video_wanted else None),
            "question_before_video": item.question if made is not None else None,
        }
    if state.transform is not None:
        out["transform"] = dict(state.transform)
    if sampling is not None:
        out["sampling"] = sampling
    return out


__all__ = ["LEDGER_SCHEMA_VERSION", "ledger"]
