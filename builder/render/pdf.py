"""The ``pdf`` renderer: tables as PDF reports.

It runs over ``builder.render.markdown``'s document branch; the layout and the text
extraction are ``builder.documents.pdf``.
"""

from __future__ import annotations

from builder.documents.pdf import markdown_to_pdf, pdf_page_count, pdf_paragraphs
from builder.render.base import register_renderer
from builder.render.markdown import DocumentRenderer


class PdfRenderer(DocumentRenderer):
    """Tables as PDF reports (``<table>.pdf``), read back by text extraction."""

    name = "pdf"
    fmt = "pdf"

    def paragraphs(self, data: bytes) -> list[str]:
        """The PDF's body paragraphs, by text extraction."""
        return pdf_paragraphs(data)


PDF = register_renderer(PdfRenderer())

__all__ = ["PdfRenderer", "markdown_to_pdf", "pdf_page_count", "pdf_paragraphs"]  # re-exported
