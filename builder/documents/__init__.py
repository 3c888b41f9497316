"""Fact-grounded documents: tables as long-form Markdown/PDF reports, every cell recoverable.

plan (genre, anchors, attribute clusters, row batches) → blocks (rows, repeated anchors, one
cluster, required cell ids) → sections from a ``DocumentWriter`` (``template`` offline or
``llm``) → block validator, regeneration with the errors → assembly → coverage pass on the
Markdown and on the PDF's extracted text.

Public names are imported lazily, so ``import builder.documents`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Alignment": "builder.documents.validators",
    "Block": "builder.documents.blocks",
    "CoverageReport": "builder.documents.coverage",
    "DocumentArtifacts": "builder.documents.assembly",
    "DocumentManifest": "builder.documents.coverage",
    "DocumentOptions": "builder.documents.assembly",
    "DocumentPlan": "builder.documents.plan",
    "DocumentRejected": "builder.documents.assembly",
    "DocumentWriter": "builder.documents.writers",
    "LlmWriter": "builder.documents.writers",
    "SectionReply": "builder.documents.writers",
    "SectionRequest": "builder.documents.writers",
    "TemplateWriter": "builder.documents.templates",
    "build_blocks": "builder.documents.blocks",
    "check_coverage": "builder.documents.coverage",
    "check_plan": "builder.documents.plan",
    "get_writer": "builder.documents.writers",
    "plan_document": "builder.documents.plan",
    "read_document": "builder.documents.coverage",
    "register_writer": "builder.documents.writers",
    "render_document": "builder.documents.assembly",
    "validate_section": "builder.documents.validators",
    "writer_names": "builder.documents.writers",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'builder.documents' has no attribute {name!r}")
