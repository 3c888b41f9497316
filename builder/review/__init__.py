"""Builder stage 4: blind two-phase expert review, adjudication and versioned repair.

A review database (SQLite by default, PostgreSQL by URL) holds users, sessions, content
blobs and an append-only event log; the protocol is a fold over that log
(:mod:`builder.review.protocol`), enforced by the service (:mod:`builder.review.service`)
behind an HTTP server and browser console (:mod:`builder.review.app`). Accepted tasks are
exported as a release (:mod:`builder.review.export`).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Database": "builder.review.db",
    "Event": "builder.review.protocol",
    "ExportReport": "builder.review.export",
    "LoadReport": "builder.review.load",
    "ProtocolError": "builder.review.protocol",
    "ReviewServer": "builder.review.app",
    "ReviewService": "builder.review.service",
    "TaskFold": "builder.review.protocol",
    "User": "builder.review.service",
    "export_release": "builder.review.export",
    "load_release": "builder.review.load",
    "replay": "builder.review.protocol",
    "review_stats": "builder.review.stats",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'builder.review' has no attribute {name!r}")
