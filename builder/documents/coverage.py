"""The coverage pass: read every cell back from a finished document and compare with the table.

A ``DocumentManifest`` (kept in the ledger, never in the workspace) records each section's
heading, rows and cell-to-surface alignments. ``read_document`` takes the paragraphs of an
artifact (Markdown split on blank lines, or PDF text re-extracted) and, section by section,
finds every aligned surface in its record's paragraph and parses it back to a typed value.
``check_coverage`` then requires every non-null cell to be recovered, no record-field to have
two values, no stray values, and the recovered table to equal the source exactly
(``builder.tables.compare_rows``: columns, typed values, null positions, multiplicity).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from builder.documents.validators import Alignment, CellSpec, read_section
from builder.documents.values import norm_text
from builder.tables import Row, TableData, compare_rows

logger = logging.getLogger(__name__)

MANIFEST_SCHEMA_VERSION = "1.0"


@dataclass(frozen=True, kw_only=True)
class ManifestSection:
    """One section of a document: its heading, rows and alignments."""

    block_id: str
    heading: str
    rows: tuple[int, ...]
    cells: tuple[str, ...]
    alignments: tuple[Alignment, ...]


@dataclass(frozen=True, kw_only=True)
class DocumentManifest:
    """Where every cell of a table is expressed in its document."""

    table: str
    columns: tuple[str, ...]
    anchors: tuple[str, ...]
    row_count: int
    null_policy: str
    cells: Mapping[str, CellSpec]
    sections: tuple[ManifestSection, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "table": self.table,
            "columns": list(self.columns),
            "anchors": list(self.anchors),
            "row_count": self.row_count,
            "null_policy": self.null_policy,
            "cells": {
                cid: [c.row, c.column, c.kind, c.null, c.source_type]
                for cid, c in self.cells.items()
            },
            "sections": [
                {
                    "block_id": s.block_id,
                    "heading": s.heading,
                    "rows": list(s.rows),
                    "cells": list(s.cells),
                    "alignments": [[a.cell_id, a.surface] for a in s.alignments],
                }
                for s in self.sections
            ],
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DocumentManifest:
        """Read a manifest written by ``to_json``.

        Raises:
            ValueError: wrong schema version or shape.
        """
        if obj.get("schema_version") != MANIFEST_SCHEMA_VERSION:
            raise ValueError(
                f"document manifest schema {obj.get('schema_version')!r} is not "
                f"{MANIFEST_SCHEMA_VERSION!r}"
            )
        anchors = tuple(obj["anchors"])
        cells = {
            cid: CellSpec(
                cell_id=cid,
                row=int(v[0]),
                column=str(v[1]),
                kind=str(v[2]),
                anchor=v[1] in anchors,
                null=bool(v[3]),
                source_type=str(v[4]),
            )
            for cid, v in obj["cells"].items()
        }
        sections = tuple(
            ManifestSection(
                block_id=s["block_id"],
                heading=s["heading"],
                rows=tuple(s["rows"]),
                cells=tuple(s["cells"]),
                alignments=tuple(Alignment(cell_id=a, surface=b) for a, b in s["alignments"]),
            )
            for s in obj["sections"]
        )
        return cls(
            table=obj["table"],
            columns=tuple(obj["columns"]),
            anchors=anchors,
            row_count=int(obj["row_count"]),
            null_policy=obj["null_policy"],
            cells=cells,
            sections=sections,
        )


@dataclass(frozen=True, kw_only=True)
class DocumentReading:
    """What was read back from a document.

    Attributes:
        rows: the table rebuilt from the document (None where nothing was read).
        values: cell id -> every value read for it.
        missing: non-null cells not recovered.
        conflicts: cells read with two or more different values.
        errors: other problems (a missing section, a stray value, a misplaced surface).
    """

    rows: list[Row]
    values: dict[str, list[Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def required(self) -> int:
        """How many non-null cells the document must carry."""
        return len(self.recovered) + len(self.missing)

    @property
    def recovered(self) -> list[str]:
        """Non-null cells recovered with one value."""
        return [
            cid
            for cid, vs in self.values.items()
            if any(v is not None for v in vs) and cid not in self.conflicts
        ]


def _key(value: Any) -> tuple[str, Any]:
    return type(value).__name__, value


def read_document(paragraphs: Sequence[str], manifest: DocumentManifest) -> DocumentReading:
    """Read every aligned cell back from a document's paragraphs (normalized plain text)."""
    paras = [norm_text(p) for p in paragraphs]
    headings = {norm_text(s.heading): s for s in manifest.sections}
    starts: dict[str, int] = {}
    for i, p in enumerate(paras):
        if p in headings and headings[p].block_id not in starts:
            starts[headings[p].block_id] = i
    ordered = sorted(starts.items(), key=lambda kv: kv[1])
    bounds = {
        bid: (i + 1, ordered[n + 1][1] if n + 1 < len(ordered) else len(paras))
        for n, (bid, i) in enumerate(ordered)
    }
    reading = DocumentReading(rows=[])
    for section in manifest.sections:
        if section.block_id not in bounds:
            reading.errors.append(f"section {section.heading!r} is missing from the document")
            continue
        lo, hi = bounds[section.block_id]
        cells = {cid: manifest.cells[cid] for cid in section.cells}
        got = read_section(
            paras[lo:hi], rows=section.rows, cells=cells, alignments=section.alignments
        )
        reading.errors.extend(f"{section.heading}: {e}" for e in got.errors)
        for cid, values in got.values.items():
            reading.values.setdefault(cid, []).extend(values)
    width = len(manifest.columns)
    table: list[list[Any]] = [[None] * width for _ in range(manifest.row_count)]
    for cid, spec in manifest.cells.items():
        values = reading.values.get(cid, [])
        if spec.null:
            continue
        distinct = {_key(v) for v in values}
        if not values:
            reading.missing.append(cid)
            continue
        if len(distinct) > 1:
            reading.conflicts.append(cid)
        table[spec.row][manifest.columns.index(spec.column)] = values[0]
    reading.rows.extend(tuple(r) for r in table)
    return reading


@dataclass(frozen=True, kw_only=True)
class CoverageReport:
    """The coverage verdict of one document artifact."""

    required: int
    recovered: int
    missing: tuple[str, ...]
    conflicts: tuple[str, ...]
    errors: tuple[str, ...]
    round_trip: str | None

    @property
    def ok(self) -> bool:
        """Full coverage, no conflicts, no stray values and an exact round trip."""
        return not (self.missing or self.conflicts or self.errors or self.round_trip)

    def reason(self) -> str:
        """One line on what is wrong (empty when ok)."""
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} cells not recovered (e.g. {self.missing[0]})")
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} cells with two values (e.g. {self.conflicts[0]})")
        if self.errors:
            parts.append(f"{len(self.errors)} problems (e.g. {self.errors[0]})")
        if self.round_trip:
            parts.append(f"round trip: {self.round_trip}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (for the ledger)."""
        return {
            "required": self.required,
            "recovered": self.recovered,
            "ok": self.ok,
            "missing": list(self.missing[:20]),
            "conflicts": list(self.conflicts[:20]),
            "errors": list(self.errors[:20]),
            "round_trip": self.round_trip,
        }


def check_coverage(
    paragraphs: Sequence[str], manifest: DocumentManifest, table: TableData
) -> CoverageReport:
    """Read a document back and compare it with its table."""
    return coverage_of(read_document(paragraphs, manifest), manifest, table)


def coverage_of(
    reading: DocumentReading, manifest: DocumentManifest, table: TableData
) -> CoverageReport:
    """The coverage verdict of what was read back from a document."""
    trip = compare_rows(table, manifest.columns, reading.rows)
    return CoverageReport(
        required=reading.required,
        recovered=len(reading.recovered),
        missing=tuple(reading.missing),
        conflicts=tuple(reading.conflicts),
        errors=tuple(reading.errors),
        round_trip=trip,
    )


__all__ = [
    "CoverageReport",
    "DocumentManifest",
    "DocumentReading",
    "ManifestSection",
    "check_coverage",
    "coverage_of",
    "read_document",
]
