"""Per-task metadata (``metadata/task_N.json``): what reports break results down by.

Keys::

    schema_version, task_id, corpus, source_id, domain,
    question_language, workspace_language, cross_language,
    modalities_present     sorted modalities of all workspace tables
    modalities_required    sorted modalities of the tables the SQL reads
    tables_required        the tables the SQL reads
    operations             out of builder.sqlinfo.OPERATIONS
    answer_rows, answer_columns, order_sensitive,
    workspace_bytes, workspace_file_count
"""

from __future__ import annotations

import logging
from typing import Any

from builder.gold import GoldAnswer
from builder.render.routing import Workspace
from builder.sources.base import SourceItem
from builder.sqlinfo import operations, order_sensitive, tables_read

logger = logging.getLogger(__name__)

METADATA_SCHEMA_VERSION = "1.0"


def required_tables(sql: str, workspace: Workspace) -> list[str]:
    """The workspace tables the SQL reads (matched case-insensitively), sorted."""
    by_lower = {name.lower(): name for name in workspace.routes}
    return sorted({by_lower[t.lower()] for t in tables_read(sql) if t.lower() in by_lower})


def task_metadata(
    item: SourceItem,
    *,
    task_id: str,
    sql: str,
    workspace: Workspace,
    answer: GoldAnswer,
    workspace_language: str,
) -> dict[str, Any]:
    """The metadata record of one built task."""
    needed = required_tables(sql, workspace)
    return {
        "schema_version": METADATA_SCHEMA_VERSION,
        "task_id": task_id,
        "corpus": item.corpus,
        "source_id": item.id,
        "domain": str(item.extra.get("domain") or item.corpus),
        "question_language": item.question_language,
        "workspace_language": workspace_language,
        "cross_language": item.question_language != workspace_language,
        "modalities_present": workspace.modalities,
        "modalities_required": sorted({workspace.routes[t].renderer for t in needed}),
        "tables_required": needed,
        "operations": operations(sql),
        "answer_rows": len(answer.rows),
        "answer_columns": len(answer.header),
        "order_sensitive": order_sensitive(sql),
        "workspace_bytes": workspace.total_bytes,
        "workspace_file_count": len(workspace.files),
    }


__all__ = ["METADATA_SCHEMA_VERSION", "required_tables", "task_metadata"]
