"""Generation blocks: row ids, the repeated anchor values, one attribute cluster, cell ids.

Every non-null source cell gets an id (``r<row>.<column>``). A block carries the rows of one
batch, their anchor cells (repeated in every block of those rows, so distant sections stay
joinable) and the cells of one attribute cluster; ``required`` lists the ids of the non-null
cells it must express and ``nulls`` the null ones, which the plan's null policy governs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from builder.documents.plan import DocumentPlan
from builder.documents.values import cell_kind
from builder.tables import TableData

logger = logging.getLogger(__name__)


def cell_id(row: int, column: str) -> str:
    """The id of one cell.

    >>> cell_id(12, "VALUENUM")
    'r12.VALUENUM'
    """
    return f"r{row}.{column}"


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One source cell as a block carries it."""

    cell_id: str
    row: int
    column: str
    value: Any
    kind: str
    label: str
    anchor: bool = False

    @property
    def is_null(self) -> bool:
        """Whether the source value is NULL."""
        return self.value is None


@dataclass(frozen=True, kw_only=True)
class Block:
    """One generation unit.

    Attributes:
        block_id: ``B<n>`` in generation order.
        batch: the row batch index.
        cluster: the attribute cluster index.
        cluster_name: the cluster's short name.
        rows: the row indices, in order.
        anchors: the anchor column names.
        columns: the cluster's column names.
        cells: every cell of the block (anchors first for each row), nulls included.
    """

    block_id: str
    batch: int
    cluster: int
    cluster_name: str
    rows: tuple[int, ...]
    anchors: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[Cell, ...]

    @property
    def required(self) -> tuple[str, ...]:
        """Ids of the non-null cells the block must express."""
        return tuple(c.cell_id for c in self.cells if not c.is_null)

    @property
    def nulls(self) -> tuple[str, ...]:
        """Ids of the null cells (stated or omitted per the null policy)."""
        return tuple(c.cell_id for c in self.cells if c.is_null)

    def cell(self, cid: str) -> Cell:
        """One cell by id."""
        for c in self.cells:
            if c.cell_id == cid:
                return c
        raise KeyError(cid)

    def record(self, row: int) -> list[Cell]:
        """The cells of one row, anchors first."""
        return [c for c in self.cells if c.row == row]

    def anchor_cells(self, row: int) -> list[Cell]:
        """The anchor cells of one row."""
        return [c for c in self.cells if c.row == row and c.anchor]


def _cell(table: TableData, plan: DocumentPlan, row: int, column: str, anchor: bool) -> Cell:
    info = plan.column(column)
    value = table.rows[row][table.schema.columns.index(column)]
    return Cell(
        cell_id=cell_id(row, column),
        row=row,
        column=column,
        value=value,
        kind=cell_kind(info.kind, value) if value is not None else info.kind,
        label=info.label,
        anchor=anchor,
    )


def build_blocks(table: TableData, plan: DocumentPlan) -> list[Block]:
    """The blocks of a plan, in its generation order."""
    blocks = []
    for n, (b, c) in enumerate(plan.block_order(), start=1):
        rows = plan.batches[b]
        columns = plan.clusters[c]
        cells = []
        for row in rows:
            cells += [_cell(table, plan, row, a, True) for a in plan.anchors]
            cells += [_cell(table, plan, row, col, False) for col in columns]
        blocks.append(
            Block(
                block_id=f"B{n:03d}",
                batch=b,
                cluster=c,
                cluster_name=plan.cluster_names[c],
                rows=tuple(rows),
                anchors=plan.anchors,
                columns=tuple(columns),
                cells=tuple(cells),
            )
        )
    return blocks


def column_domains(
    table: TableData, columns: Sequence[str], *, min_len: int = 3, limit: int = 5000
) -> dict[str, frozenset[str]]:
    """Distinct text values of text columns (at least ``min_len`` characters).

    They are used to spot a competing value of a field in a record's paragraph.
    """
    out: dict[str, frozenset[str]] = {}
    for column in columns:
        i = table.schema.columns.index(column)
        values = {
            row[i]
            for row in table.rows
            if isinstance(row[i], str) and len(row[i].strip()) >= min_len
        }
        if values and len(values) <= limit:
            out[column] = frozenset(values)
    return out


__all__ = ["Block", "Cell", "build_blocks", "cell_id", "column_domains"]
