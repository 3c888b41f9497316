"""JSON renderer: one ``<table>.json`` per table, a list of records (one object a line).

Records keep JSON types (integer, number, string, null), so the typed round trip is exact.
A table without rows has no records to carry its columns, and binary or non-finite values
have no JSON form: those tables go to another renderer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence

from builder.render.base import ReadBack, Rendered, register_renderer
from builder.tables import TableData, TableSchema

logger = logging.getLogger(__name__)


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def records_json(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> bytes:
    """Record-oriented JSON, one record a line.

    >>> print(records_json(["a", "b"], [(1, None), (2, "x")]).decode())
    [
    {"a": 1, "b": null},
    {"a": 2, "b": "x"}
    ]
    <BLANKLINE>
    """
    encode = _ENCODER.encode
    lines = [encode(dict(zip(columns, row, strict=True))) for row in rows]
    return ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8")


class JsonRenderer:
    """One JSON file of records per table."""

    name = "json"

    def compatible(self, table: TableData) -> str | None:
        """JSON needs at least one row (to carry the columns) and no binary values."""
        if not table.rows:
            return "no rows to carry the columns"
        return "binary values" if table.has_blob else None

    def render(self, tables: Sequence[TableData], *, names: Mapping[str, str]) -> Rendered:
        """Write each table as ``<stem>.json``."""
        files, locations = {}, {}
        for table in tables:
            path = f"{names[table.name]}.json"
            files[path] = records_json(table.schema.columns, table.rows)
            locations[table.name] = path
        return Rendered(files=files, locations=locations)

    def read_back(self, rendered: Rendered, schemas: Sequence[TableSchema]) -> dict[str, ReadBack]:
        """Parse each JSON file back; every record must have the same keys."""
        out = {}
        for schema in schemas:
            data = json.loads(rendered.files[rendered.locations[schema.name]].decode("utf-8"))
            if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
                raise ValueError("not a list of records")
            columns = tuple(data[0]) if data else ()
            rows = []
            for record in data:
                if tuple(record) != columns:
                    raise ValueError("records have different keys")
                rows.append(tuple(record.values()))
            out[schema.name] = ReadBack(columns=columns, rows=rows)
        return out


JSON = register_renderer(JsonRenderer())

__all__ = ["JsonRenderer", "records_json"]
