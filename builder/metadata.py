"""Per-task metadata (``metadata/task_N.json``): what reports break results down by.

Keys::

    schema_version, task_id, corpus, source_id, domain,
    question_language, workspace_language, cross_language,
    modalities_present     sorted modalities of all workspace tables
    modalities_required    a smallest set of modalities holding every table the SQL reads
    paper_operations       the paper's operation categories (projection, filtering, ...)
    answer_shape           {rows: one|multiple, columns: one|multiple}
    tables_required        the tables the SQL reads
    operations             out of builder.sqlinfo.OPERATIONS
    answer_rows, answer_columns, order_sensitive,
    workspace_bytes, workspace_file_count
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
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
        "modalities_required": minimal_carriers(
            {t: [workspace.routes[t].renderer] for t in needed}
        ),
        "tables_required": needed,
        "operations": operations(sql),
        "paper_operations": paper_operations(
            sql,
            cross_language=item.question_language != workspace_language,
            modalities=sorted({workspace.routes[t].renderer for t in needed}),
        ),
        "answer_rows": len(answer.rows),
        "answer_columns": len(answer.header),
        "answer_shape": answer_shape(len(answer.rows), len(answer.header)),
        "order_sensitive": order_sensitive(sql) and len(answer.rows) > 1,
        "workspace_bytes": workspace.total_bytes,
        "workspace_file_count": len(workspace.files),
    }


# ---- the paper's composition categories -----------------------------------------------------

CARRIER_FAMILIES = {
    "csv": "structured_file",
    "json": "structured_file",
    "sqlite": "database",
    "markdown": "document",
    "pdf": "document",
    "video": "video",
}
"""The paper's carrier families (§5.2): CSV/JSON, SQLite, Markdown/PDF, video."""


def minimal_carriers(
    holders: Mapping[str, Iterable[str]], preference: Sequence[str] = ()
) -> list[str]:
    """A smallest set of modalities from which every needed table can be recovered.

    Args:
        holders: needed table -> the modalities that hold it (verified renderings).
        preference: modalities in the order a solver would read them; among sets of the
            same size, the one whose modalities come first in this order wins.

    >>> minimal_carriers({"a": ["csv", "sqlite"], "b": ["sqlite", "pdf"]})
    ['sqlite']
    >>> minimal_carriers({"a": ["csv"], "b": ["pdf"], "c": ["video"]})
    ['csv', 'pdf', 'video']
    >>> minimal_carriers({})
    []
    """
    from itertools import combinations

    needs = {t: set(m) for t, m in holders.items() if m}
    if not needs:
        return []
    universe = sorted({m for ms in needs.values() for m in ms})
    rank = {m: i for i, m in enumerate(preference)}

    def cost(combo: Iterable[str]) -> tuple[int, ...]:
        return tuple(sorted(rank.get(m, len(rank)) for m in combo))

    for size in range(1, len(universe) + 1):
        fits = [c for c in combinations(universe, size) if all(needs[t] & set(c) for t in needs)]
        if fits:
            return sorted(min(fits, key=lambda c: (cost(c), c)))
    return universe  # pragma: no cover - the universe always covers every table


def paper_operations(sql: str, *, cross_language: bool, modalities: Sequence[str]) -> list[str]:
    """The paper's operation categories (§5.3) a task exercises.

    Projection, filtering, ordering (ORDER BY or a rank window), aggregation and joins from
    the SQL; document and video understanding from the required modalities; schema and
    entity alignment when question and workspace differ in language.
    """
    from builder.sqlinfo import sql_operations

    ops = sql_operations(sql)
    if "document" in {CARRIER_FAMILIES.get(m) for m in modalities}:
        ops.add("document_understanding")
    if "video" in modalities:
        ops.add("video_understanding")
    if cross_language:
        ops.update({"schema_alignment", "entity_alignment"})
    return sorted(ops)


def answer_shape(rows: int, columns: int) -> dict[str, str]:
    """The paper's answer-shape groups (Table 12): one or multiple rows and columns.

    >>> answer_shape(1, 3)
    {'rows': 'one', 'columns': 'multiple'}
    """
    return {
        "rows": "one" if rows <= 1 else "multiple",
        "columns": "one" if columns <= 1 else "multiple",
    }


__all__ = [
    "CARRIER_FAMILIES",
    "METADATA_SCHEMA_VERSION",
    "answer_shape",
    "minimal_carriers",
    "paper_operations",
    "required_tables",
    "task_metadata",
]
