"""DataSpace-Builder: Text-to-SQL sources -> heterogeneous workspace tasks with executed gold.

The first path: source loaders (``load_source``), dialect fixes, a per-task database copy,
modality routing and rendering (CSV, JSON, SQLite) with round-trip checks, gold by
execution, evaluation config and metadata derived from the answer, and release writing.

Public names are imported lazily, so ``import builder`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BuildOptions": "builder.pipeline",
    "BuildReport": "builder.report",
    "LoadedSource": "builder.sources.base",
    "Rejection": "builder.sources.base",
    "SourceItem": "builder.sources.base",
    "build_bundled_release": "builder.pipeline",
    "build_release": "builder.pipeline",
    "build_task": "builder.pipeline",
    "load_source": "builder.sources.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'builder' has no attribute {name!r}")
