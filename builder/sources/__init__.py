"""Source loaders: Text-to-SQL corpora on disk -> ``SourceItem`` records."""

from builder.sources.base import (
    LoadedSource,
    Rejection,
    SourceItem,
    check_database,
    detect_language,
    load_source,
    loader_kinds,
    register_loader,
)

__all__ = [
    "LoadedSource",
    "Rejection",
    "SourceItem",
    "check_database",
    "detect_language",
    "load_source",
    "loader_kinds",
    "register_loader",
]
