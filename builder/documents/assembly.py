"""Plan → blocks → sections (validated, regenerated on failure) → Markdown → coverage → PDF.

``render_document`` is the whole document branch for one table. Every block is written by
a ``DocumentWriter`` and checked by ``validate_section``; a rejected section goes back to the
writer with the errors (``dataspace.ask``), up to ``max_attempts`` times, after which the
document is rejected (``DocumentRejected``, a one-line reason). The assembled Markdown is
read back cell by cell (``check_coverage``); a PDF, when asked for, is rendered with pymupdf
and its re-extracted text must pass the same coverage check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from builder.documents.blocks import Block, build_blocks, column_domains
from builder.documents.coverage import (
    CoverageReport,
    DocumentManifest,
    DocumentReading,
    ManifestSection,
    coverage_of,
    read_document,
)
from builder.documents.plan import DocumentPlan, check_plan, plan_document
from builder.documents.templates import preface
from builder.documents.validators import (
    CellSpec,
    split_paragraphs,
    validate_section,
)
from builder.documents.values import format_value, has_cjk
from builder.documents.writers import (
    DocumentWriter,
    SectionReply,
    SectionRequest,
    get_writer,
)
from builder.errors import Rejected
from builder.tables import TableData
from dataspace.ask import Rejection, ask

logger = logging.getLogger(__name__)

FORMATS = ("markdown", "pdf")


class DocumentRejected(Rejected, ValueError):
    """A table could not be written as a faithful document; carries a one-line reason."""

    stage_name = "render"


@dataclass(frozen=True, kw_only=True)
class DocumentOptions:
    """How documents are planned and written.

    Attributes:
        language: ``en``, ``zh`` or ``auto`` (Chinese when the table's text is).
        writer: the writer provider (``template`` or ``llm``).
        writer_options: options for the writer factory (``model``, ``client`` ...).
        genre, null_policy, pass_order: fix these plan choices (None: the planner picks).
        domain: the tables' domain (genres stay within it).
        block_cells: the cell budget of one block.
        max_attempts: writer attempts per block before the document is rejected.
        max_cells: tables with more cells are not routed to documents.
        seed: variation seed (combined with the table name).
    """

    language: str = "auto"
    writer: str = "template"
    writer_options: dict[str, Any] = field(default_factory=dict)
    genre: str | None = None
    domain: str = ""
    null_policy: str | None = None
    pass_order: str | None = None
    block_cells: int = 48
    max_attempts: int = 3
    max_cells: int = 2400
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class BlockRecord:
    """How one block was written: attempts and the errors of rejected attempts."""

    block_id: str
    attempts: int
    rejected: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class DocumentArtifacts:
    """A table rendered as a document.

    Attributes:
        table: the table name.
        plan: the plan used.
        markdown: the Markdown text (UTF-8 bytes).
        pdf: the PDF bytes when asked for.
        manifest: where every cell is expressed (ledger only).
        coverage: format -> coverage verdict of that artifact.
        blocks: per-block attempt records.
        pages: PDF pages (0 without a PDF).
        seconds: wall seconds per step (``write``, ``markdown``, ``pdf``).
        writer: the writer provider's name.
        readings: format -> the cells its coverage check read back from that artifact.
    """

    table: str
    plan: DocumentPlan
    markdown: bytes
    pdf: bytes | None
    manifest: DocumentManifest
    coverage: dict[str, CoverageReport]
    blocks: tuple[BlockRecord, ...]
    pages: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    writer: str = "template"
    readings: dict[str, DocumentReading] = field(default_factory=dict, repr=False)

    def reading(self, fmt: str, data: bytes) -> DocumentReading | None:
        """What the coverage check read back from ``data`` if it is this document's ``fmt``.

        A round trip of the same bytes reads the same cells, so it reuses this reading.
        """
        own = self.pdf if fmt == "pdf" else self.markdown if fmt == "markdown" else None
        return self.readings.get(fmt) if own is not None and own == data else None

    @property
    def characters(self) -> int:
        """Characters of the Markdown text."""
        return len(self.markdown.decode("utf-8"))

    def ledger(self) -> dict[str, Any]:
        """What the ledger records about this document."""
        regenerated = [b for b in self.blocks if b.attempts > 1]
        return {
            "table": self.table,
            "writer": self.writer,
            "plan": self.plan.to_json(),
            "blocks": len(self.blocks),
            "writer_calls": sum(b.attempts for b in self.blocks),
            "regenerated": [
                {"block": b.block_id, "attempts": b.attempts, "errors": list(b.rejected[:5])}
                for b in regenerated
            ],
            "characters": self.characters,
            "pages": self.pages,
            "coverage": {k: v.to_json() for k, v in self.coverage.items()},
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }


def detect_language(table: TableData) -> str:
    """``zh`` when the table's text values (or name) hold CJK characters, else ``en``."""
    if has_cjk(table.name) or any(has_cjk(c) for c in table.schema.columns):
        return "zh"
    for row in table.rows[:200]:
        for v in row:
            if isinstance(v, str) and has_cjk(v):
                return "zh"
    return "en"


def document_compatible(table: TableData, max_cells: int) -> str | None:
    """Why a table cannot become a document (from its metadata), or None."""
    if not table.rows:
        return "no rows to write about"
    if table.has_blob:
        return "binary values"
    cells = len(table.rows) * len(table.schema.columns)
    if cells > max_cells:
        return f"{cells} cells exceed the document budget of {max_cells}"
    return None


def heading(plan: DocumentPlan, block: Block, table: TableData, number: int) -> str:
    """A unique section heading naming the block's cluster and record range."""
    first, last = block.anchor_cells(block.rows[0]), block.anchor_cells(block.rows[-1])

    def name(cells: Sequence[Any]) -> str:
        c = cells[0]
        return format_value(c.value, c.kind) if c.kind not in ("date", "datetime") else c.value

    span = (
        name(first)
        if len(block.rows) == 1
        else (
            f"{name(first)}至{name(last)}"
            if plan.language == "zh"
            else f"{name(first)} to {name(last)}"
        )
    )
    label = first[0].label
    if plan.language == "zh":
        return f"第{number}节 {block.cluster_name}（{label}：{span}）"
    return f"Section {number}. {block.cluster_name.capitalize()} ({label} {span})"


def _write_block(
    writer: DocumentWriter,
    plan: DocumentPlan,
    block: Block,
    *,
    max_attempts: int,
    domains: dict[str, frozenset[str]],
) -> tuple[SectionReply, BlockRecord]:

    def attempt(history: tuple[Rejection, ...]) -> tuple[SectionReply, str]:
        request = SectionRequest(plan=plan, block=block, attempt=len(history) + 1, history=history)
        reply = writer.write(request)
        return reply, reply.raw or reply.section

    def check(reply: SectionReply) -> list[str]:
        return validate_section(
            block, reply.section, reply.alignments, null_policy=plan.null_policy, domains=domains
        )

    asked = ask(
        attempt,
        check,
        max_attempts=max_attempts,
        what=f"block {block.block_id} of {plan.table}",
    )
    if asked.value is None:
        raise DocumentRejected(
            f"table {plan.table!r} block {block.block_id}: {asked.errors[0]} "
            f"(rejected {max_attempts} times)"
        )
    rejected = tuple(r.errors[0] for r in asked.rejections)
    return asked.value, BlockRecord(
        block_id=block.block_id, attempts=asked.attempts, rejected=rejected
    )


def render_document(
    table: TableData,
    *,
    options: DocumentOptions | None = None,
    writer: DocumentWriter | None = None,
    formats: Sequence[str] = ("markdown",),
    plan: DocumentPlan | None = None,
) -> DocumentArtifacts:
    """Write one table as a fact-grounded document and check it.

    Args:
        table: the table (all its rows).
        options: planning and writing options.
        writer: the writer (default: ``options.writer`` from the registry).
        formats: ``markdown`` and/or ``pdf``.
        plan: a plan to use instead of the deterministic planner's (validated).

    Raises:
        DocumentRejected: the table is not documentable, the plan is invalid, a block kept
            failing validation, or an artifact failed its coverage check.
    """
    opts = options or DocumentOptions()
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"unknown document format {fmt!r}; known: {list(FORMATS)}")
    why = document_compatible(table, opts.max_cells)
    if why:
        raise DocumentRejected(f"table {table.name!r}: {why}")
    writer = writer or get_writer(opts.writer, **opts.writer_options)
    language = detect_language(table) if opts.language == "auto" else opts.language
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    if plan is None:
        try:
            plan = plan_document(
                table,
                language=language,
                seed=opts.seed,
                block_cells=opts.block_cells,
                genre=opts.genre,
                domain=opts.domain,
                null_policy=opts.null_policy,
                pass_order=opts.pass_order,
            )
        except ValueError as exc:
            raise DocumentRejected(str(exc)) from None
    problems = check_plan(plan, table, block_cells=opts.block_cells)
    if problems:
        raise DocumentRejected(f"table {table.name!r}: bad plan: {problems[0]}")
    blocks = build_blocks(table, plan)
    text_cols = [c.name for c in plan.columns if c.kind == "text" and c.name not in plan.anchors]
    domains = column_domains(table, text_cols)
    parts = [f"# {plan.title}", *preface(plan)]
    sections, records = [], []
    for number, block in enumerate(blocks, start=1):
        reply, record = _write_block(
            writer, plan, block, max_attempts=opts.max_attempts, domains=domains
        )
        head = heading(plan, block, table, number)
        parts += [f"## {head}", reply.section.strip()]
        sections.append(
            ManifestSection(
                block_id=block.block_id,
                heading=head,
                rows=block.rows,
                cells=tuple(c.cell_id for c in block.cells),
                alignments=reply.alignments,
            )
        )
        records.append(record)
    seconds["write"] = time.perf_counter() - started
    markdown = "\n\n".join(parts) + "\n"
    cells = {}
    for block in blocks:
        for c in block.cells:
            cells[c.cell_id] = CellSpec(
                cell_id=c.cell_id,
                row=c.row,
                column=c.column,
                kind=c.kind,
                anchor=c.anchor,
                null=c.is_null,
                source_type=type(c.value).__name__,
            )
    manifest = DocumentManifest(
        table=table.name,
        columns=table.schema.columns,
        anchors=plan.anchors,
        row_count=len(table.rows),
        null_policy=plan.null_policy,
        cells=cells,
        sections=tuple(sections),
    )
    t0 = time.perf_counter()
    readings = {"markdown": read_document(split_paragraphs(markdown), manifest)}
    coverage = {"markdown": coverage_of(readings["markdown"], manifest, table)}
    seconds["markdown"] = time.perf_counter() - t0
    if not coverage["markdown"].ok:
        raise DocumentRejected(
            f"table {table.name!r}: markdown coverage: {coverage['markdown'].reason()}"
        )
    pdf, pages = None, 0
    if "pdf" in formats:
        from builder.documents.pdf import markdown_to_pdf, pdf_page_count, pdf_paragraphs

        t0 = time.perf_counter()
        pdf = markdown_to_pdf(markdown, title=plan.title, language=plan.language)
        readings["pdf"] = read_document(pdf_paragraphs(pdf), manifest)
        coverage["pdf"] = coverage_of(readings["pdf"], manifest, table)
        pages = pdf_page_count(pdf)
        seconds["pdf"] = time.perf_counter() - t0
        if not coverage["pdf"].ok:
            raise DocumentRejected(
                f"table {table.name!r}: pdf coverage: {coverage['pdf'].reason()}"
            )
    return DocumentArtifacts(
        table=table.name,
        plan=plan,
        markdown=markdown.encode("utf-8"),
        pdf=pdf,
        manifest=manifest,
        coverage=coverage,
        blocks=tuple(records),
        pages=pages,
        seconds=seconds,
        writer=getattr(writer, "name", type(writer).__name__),
        readings=readings,
    )


__all__ = [
    "FORMATS",
    "BlockRecord",
    "DocumentArtifacts",
    "DocumentOptions",
    "DocumentRejected",
    "detect_language",
    "document_compatible",
    "heading",
    "render_document",
]
