"""Per-task metadata (``metadata/task_N.json``): what reports break results down by.

Keys::

    schema_version, task_id, corpus, source_id, domain,
    question_language, workspace_language, cross_language,
    modalities_present     sorted modalities of the workspace (the video included)
    modalities_required    a smallest set of modalities holding every table the SQL reads
    tables_required        the workspace tables the SQL reads
    operations             out of builder.sqlinfo.OPERATIONS
    paper_operations       the paper's operation categories (projection, filtering, ...)
    answer_rows, answer_columns,
    answer_shape           {rows: one|multiple, columns: one|multiple}
    order_sensitive, workspace_bytes, workspace_file_count,
    carrier_families_required   the paper's carrier families of the required modalities
    tables_withheld        tables left out of the workspace (their evidence is in the video)
    video                  {strategy, seconds, question_rewritten} or null
    documents              the document renderers used (markdown, pdf)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from builder.gold import GoldAnswer
from builder.render.routing import READ_PREFERENCE, RoutedWorkspace
from builder.sources.base import SourceItem
from builder.sqlinfo import operations, order_sensitive, tables_read

if TYPE_CHECKING:
    from builder.render.video import VideoArtifacts

logger = logging.getLogger(__name__)

METADATA_SCHEMA_VERSION = "1.0"


def required_tables(sql: str, workspace: RoutedWorkspace) -> list[str]:
    """The workspace tables the SQL reads (matched case-insensitively), sorted.

    A table withheld from the workspace (its evidence is in the video) is not among them.
    """
    needed = {name.lower() for name in tables_read(sql)}
    return sorted(t for t in workspace.routes if t.lower() in needed)


def task_metadata(
    item: SourceItem,
    *,
    task_id: str,
    sql: str,
    workspace: RoutedWorkspace,
    answer: GoldAnswer,
    workspace_language: str,
    video: VideoArtifacts | None = None,
    question_before_video: str = "",
) -> dict[str, Any]:
    """The metadata record of one built task.

    Required modalities follow the verified path: a smallest set of carriers that holds
    every table the SQL reads (the cheapest to read first); a video makes itself required.
    """
    needed = required_tables(sql, workspace)
    holders = {t: [r.renderer for r in workspace.routes.get(t, ())] for t in needed}
    required = set(minimal_carriers(holders, READ_PREFERENCE))
    present = set(workspace.modalities)
    files = len(workspace.files)
    size = workspace.total_bytes
    if video is not None:
        required.add("video")
        present.add("video")
        files += 1
        size += len(video.video)
    cross = item.question_language != workspace_language
    return {
        "schema_version": METADATA_SCHEMA_VERSION,
        "task_id": task_id,
        "corpus": item.corpus,
        "source_id": item.id,
        "domain": str(item.extra.get("domain") or item.corpus),
        "question_language": item.question_language,
        "workspace_language": workspace_language,
        "cross_language": cross,
        "modalities_present": sorted(present),
        "modalities_required": sorted(required),
        "tables_required": needed,
        "operations": operations(sql),
        "paper_operations": paper_operations(
            sql, cross_language=cross, modalities=sorted(required)
        ),
        "answer_rows": len(answer.rows),
        "answer_columns": len(answer.header),
        "answer_shape": answer_shape(len(answer.rows), len(answer.header)),
        "order_sensitive": order_sensitive(sql) and len(answer.rows) > 1,
        "workspace_bytes": size,
        "workspace_file_count": files,
        "carrier_families_required": sorted({CARRIER_FAMILIES[m] for m in required}),
        "tables_withheld": list(workspace.withheld),
        "video": (
            {
                "strategy": video.strategy,
                "seconds": round(video.duration, 3),
                "question_rewritten": video.question != question_before_video,
            }
            if video is not None
            else None
        ),
        "documents": sorted({k.split("/")[1] for k in workspace.documents}),
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
