"""The renderer interface and its registry by name.

A renderer turns tables into workspace files and parses those files back, so that every
rendering can be round-trip checked against the table it came from. The renderer's name is
also the modality it produces (``csv``, ``json``, ``sqlite``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from builder.tables import Row, TableData, TableSchema
from dataspace.registry import Registry

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Rendered:
    """Files a renderer produced and where each table went.

    Attributes:
        files: workspace-relative path -> bytes.
        locations: table name -> the path that holds it.
    """

    files: Mapping[str, bytes]
    locations: Mapping[str, str]


@dataclass(frozen=True, kw_only=True)
class ReadBack:
    """One table as parsed back from a rendering."""

    columns: tuple[str, ...]
    rows: list[Row]


class Renderer(Protocol):
    """Renders tables into files of one modality and reads them back.

    Attributes:
        name: the renderer's name, which is also its modality.
    """

    name: str

    def compatible(self, table: TableData) -> str | None:
        """Why this renderer cannot hold ``table`` (from its metadata), or None."""
        ...

    def render(self, tables: Sequence[TableData], *, names: Mapping[str, str]) -> Rendered:
        """Render ``tables`` into files.

        ``names`` maps each table (and ``""``, for a file shared by several tables) to a
        safe file stem.
        """
        ...

    def read_back(self, rendered: Rendered, schemas: Sequence[TableSchema]) -> dict[str, ReadBack]:
        """Parse the files back into typed rows, one entry per table.

        Raises:
            ValueError: the files cannot be parsed.
        """
        ...


RENDERERS: Registry[Renderer] = Registry(
    "renderer",
    {
        "csv": "builder.render.csv_renderer:CSV",
        "json": "builder.render.json_renderer:JSON",
        "markdown": "builder.render.markdown:MARKDOWN",
        "pdf": "builder.render.pdf:PDF",
        "sqlite": "builder.render.sqlite_renderer:SQLITE",
    },
)


def register_renderer(renderer: Renderer) -> Renderer:
    """Register a renderer under its name."""
    RENDERERS.register(renderer.name, renderer)
    return renderer


def get_renderer(name: str) -> Renderer:
    """The renderer registered under ``name``.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    return RENDERERS.get(name)


def renderer_names() -> list[str]:
    """Names of the known renderers, sorted."""
    return RENDERERS.names()


_UNSAFE = re.compile(r"[^\w.\-]+")


def safe_stem(name: str) -> str:
    """A file stem that is safe on every filesystem (letters, digits, ``_.-``; CJK kept).

    >>> safe_stem("lc stock/archives")
    'lc_stock_archives'
    >>> safe_stem("..")
    'table'
    """
    stem = _UNSAFE.sub("_", name).strip("._") or "table"
    return stem[:120]


__all__ = [
    "RENDERERS",
    "ReadBack",
    "Rendered",
    "Renderer",
    "get_renderer",
    "register_renderer",
    "renderer_names",
    "safe_stem",
]
