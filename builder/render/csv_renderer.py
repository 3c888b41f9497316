r"""CSV renderer: one ``<table>.csv`` per table (UTF-8, ``\n`` line ends, minimal quoting).

NULL is an empty cell, so a table whose text holds empty strings cannot round-trip through
CSV; neither can binary data. Values are parsed back by the column's SQLite affinity: text
columns stay text, other columns become ``int`` or ``float`` when they look like numbers.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from builder.render.base import ReadBack, Rendered, register_renderer
from builder.tables import TableData, TableSchema

logger = logging.getLogger(__name__)

_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def format_cell(value: Any) -> str:
    """A CSV cell for a SQLite value (NULL is empty; floats use their shortest repr).

    >>> [format_cell(v) for v in (None, 7, 0.1, "a,b")]
    ['', '7', '0.1', 'a,b']
    """
    if value is None:
        return ""
    if isinstance(value, bytes):
        raise ValueError("binary values have no CSV form")
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_cell(text: str, column_affinity: str) -> Any:
    """A typed value from a CSV cell, by the column's affinity.

    >>> [parse_cell(s, "NUMERIC") for s in ("", "3", "2.50", "abc")]
    [None, 3, 2.5, 'abc']
    >>> parse_cell("007", "TEXT")
    '007'
    """
    if text == "":
        return None
    if column_affinity == "TEXT":
        return text
    if _INT_RE.match(text):
        return int(text)
    if _FLOAT_RE.match(text):
        return float(text)
    return text


def write_csv(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> bytes:
    r"""Strict CSV bytes: csv module, QUOTE_MINIMAL, ``\n`` line ends, UTF-8."""
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(header)
    writer.writerows([format_cell(v) for v in row] for row in rows)
    return buf.getvalue().encode("utf-8")


class CsvRenderer:
    """One CSV file per table."""

    name = "csv"

    def compatible(self, table: TableData) -> str | None:
        """CSV holds any table without binary values."""
        return "binary values" if table.has_blob else None

    def render(self, tables: Sequence[TableData], *, names: Mapping[str, str]) -> Rendered:
        """Write each table as ``<stem>.csv``."""
        files, locations = {}, {}
        for table in tables:
            path = f"{names[table.name]}.csv"
            files[path] = write_csv(table.schema.columns, table.rows)
            locations[table.name] = path
        return Rendered(files=files, locations=locations)

    def read_back(self, rendered: Rendered, schemas: Sequence[TableSchema]) -> dict[str, ReadBack]:
        """Parse each CSV file back with the column affinities."""
        out = {}
        for schema in schemas:
            data = rendered.files[rendered.locations[schema.name]]
            reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""), strict=True)
            records = list(reader)
            if not records:
                raise ValueError("no header row")
            affinities = schema.affinities
            header = tuple(records[0])
            rows = []
            for rec in records[1:]:
                if len(rec) != len(header) or len(rec) != len(affinities):
                    raise ValueError(f"row with {len(rec)} cells, header has {len(header)}")
                rows.append(tuple(parse_cell(c, a) for c, a in zip(rec, affinities, strict=True)))
            out[schema.name] = ReadBack(columns=header, rows=rows)
        return out


CSV = register_renderer(CsvRenderer())

__all__ = ["CsvRenderer", "format_cell", "parse_cell", "write_csv"]
