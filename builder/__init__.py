"""DataSpace-Builder: Text-to-SQL sources -> heterogeneous workspace tasks with executed gold.

A build spec (``BuildSpec``) names the sources and options; ``build_release`` runs every
item through the stages (``builder.stages.STAGES``: translate, sample, gold, route, video,
render, config, ledger, checks) in process or on Ray, and writes the release and its build
report.

Public names are imported lazily, so ``import builder`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BuildReport": "builder.report",
    "BuildSpec": "builder.spec",
    "LanguagePlan": "builder.spec",
    "LoadedSource": "builder.sources.base",
    "Rejection": "builder.sources.base",
    "SourceItem": "builder.sources.base",
    "SourceSpec": "builder.spec",
    "Stage3Options": "builder.spec",
    "build_release": "builder.driver",
    "build_task": "builder.driver",
    "bundled_spec": "builder.driver",
    "load_source": "builder.sources.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'builder' has no attribute {name!r}")
