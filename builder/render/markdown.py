"""Markdown documents: tables written as long-form, fact-grounded reports.

``MarkdownRenderer`` (name ``markdown``) runs the document branch
(``builder.documents.render_document``) for each table and writes ``<table>.md``. Its round
trip reads the cells back from the artifact itself (the manifest says which section and
which surface carries each cell) and rebuilds the table, so ``compare_rows`` checks a
document exactly like a CSV file. The manifests ride along in ``DocumentRendered`` and go
to the ledger, never to the workspace.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from builder.documents.assembly import (
    DocumentArtifacts,
    DocumentOptions,
    DocumentRejected,
    document_compatible,
    render_document,
)
from builder.documents.coverage import read_document
from builder.documents.plan import choose_anchors, describe_columns
from builder.documents.validators import split_paragraphs
from builder.render.base import ReadBack, Rendered, register_renderer
from builder.tables import TableData, TableSchema

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class DocumentRendered(Rendered):
    """A rendering of documents, with each table's document record for the ledger."""

    documents: Mapping[str, DocumentArtifacts] = field(default_factory=dict)


class DocumentRenderer:
    """Shared logic of the Markdown and PDF renderers.

    Args:
        options: document options (language, writer, budgets, seed).
    """

    name = "markdown"
    fmt = "markdown"

    def __init__(self, options: DocumentOptions | None = None) -> None:
        self.options = options or DocumentOptions()

    def compatible(self, table: TableData) -> str | None:
        """Why a table cannot be a document (rows, binary values, size, anchors), or None."""
        why = document_compatible(table, self.options.max_cells)
        if why:
            return why
        if choose_anchors(table, describe_columns(table, "en")) is None:
            return "no columns identify its rows"
        return None

    def render(self, tables: Sequence[TableData], *, names: Mapping[str, str]) -> Rendered:
        """Write each table as a document.

        Raises:
            ValueError: a table could not be written faithfully (``DocumentRejected``).
        """
        files: dict[str, bytes] = {}
        locations: dict[str, str] = {}
        documents: dict[str, DocumentArtifacts] = {}
        formats = ("markdown", "pdf") if self.fmt == "pdf" else ("markdown",)
        for table in tables:
            opts = self.options
            doc = render_document(table, options=opts, formats=formats)
            ext = "pdf" if self.fmt == "pdf" else "md"
            path = f"{names[table.name]}.{ext}"
            data = doc.pdf if self.fmt == "pdf" else doc.markdown
            assert data is not None
            files[path] = data
            locations[table.name] = path
            documents[table.name] = doc
        return DocumentRendered(files=files, locations=locations, documents=documents)

    def paragraphs(self, data: bytes) -> list[str]:
        """The artifact's paragraphs as plain text."""
        return split_paragraphs(data.decode("utf-8"))

    def read_back(self, rendered: Rendered, schemas: Sequence[TableSchema]) -> dict[str, ReadBack]:
        """Rebuild each table from its document's text (values read from the artifact).

        Raises:
            ValueError: not a document rendering, or the artifact cannot be read.
        """
        if not isinstance(rendered, DocumentRendered):
            raise ValueError("a document rendering carries its manifests")
        out = {}
        for schema in schemas:
            doc = rendered.documents[schema.name]
            data = rendered.files[rendered.locations[schema.name]]
            reading = doc.reading(self.fmt, data) or read_document(
                self.paragraphs(data), doc.manifest
            )
            if reading.conflicts:
                raise ValueError(
                    f"{len(reading.conflicts)} cells have two values in the "
                    f"document (e.g. {reading.conflicts[0]})"
                )
            if reading.errors:
                raise ValueError(f"document problem: {reading.errors[0]}")
            out[schema.name] = ReadBack(columns=schema.columns, rows=reading.rows)
        return out


class MarkdownRenderer(DocumentRenderer):
    """Tables as Markdown reports (``<table>.md``)."""

    name = "markdown"
    fmt = "markdown"


MARKDOWN = register_renderer(MarkdownRenderer())

__all__ = ["DocumentRejected", "DocumentRendered", "DocumentRenderer", "MarkdownRenderer"]
