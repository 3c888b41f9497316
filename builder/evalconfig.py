"""The evaluation config (schema 1.0) of a task, derived from its gold answer.

Per column, from the values SQLite returned:

- all integers: ``number`` compared as ``integer``;
- numbers with at least one real: ``number`` with ``decimal_places`` d, d being the largest
  count of decimals in the values' shortest repr, capped at 4;
- all text ``YYYY-MM-DD``: ``date``; all text ISO date-times (dates allowed among them):
  ``datetime``;
- anything else (and all-NULL columns): ``text``.

``order_sensitive`` is true exactly when the outermost query has an ORDER BY and the
answer has more than one row.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from builder.sqlinfo import order_sensitive
from builder.tables import Row

logger = logging.getLogger(__name__)

CONFIG_SCHEMA_VERSION = "1.0"
MAX_DECIMALS = 4

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$"
)


def decimals(value: float) -> int:
    """Decimals in the shortest repr of a float (``2.0`` has one).

    >>> [decimals(v) for v in (2.0, 0.25, 1e-05, 1.5e+16, 3.0666666666666664)]
    [1, 2, 5, 0, 16]
    """
    exponent = Decimal(repr(value)).as_tuple().exponent
    assert isinstance(exponent, int)
    return max(0, -exponent)


def _is_date(text: str) -> bool:
    if not _DATE_RE.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_datetime(text: str) -> bool:
    if not _DATETIME_RE.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def column_rule(values: Sequence[Any]) -> dict[str, Any]:
    """The type (and comparison) of one answer column from its values.

    >>> column_rule([1, 2, None])
    {'type': 'number', 'comparison': {'mode': 'integer'}}
    >>> column_rule([1, 2.5, 0.125])
    {'type': 'number', 'comparison': {'mode': 'decimal_places', 'digits': 3}}
    >>> column_rule(["2105-12-31", None]), column_rule(["2105-12-31 23:59:00", "2105-01-01"])
    ({'type': 'date'}, {'type': 'datetime'})
    >>> column_rule(["000001", "2021"])
    {'type': 'text'}
    """
    present = [v for v in values if v is not None]
    if not present:
        return {"type": "text"}
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return {"type": "number", "comparison": {"mode": "integer"}}
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        digits = max(decimals(v) if isinstance(v, float) else 0 for v in present)
        return {
            "type": "number",
            "comparison": {"mode": "decimal_places", "digits": min(digits, MAX_DECIMALS)},
        }
    if all(isinstance(v, str) for v in present):
        if all(_is_date(v) for v in present):
            return {"type": "date"}
        if all(_is_date(v) or _is_datetime(v) for v in present):
            return {"type": "datetime"}
    return {"type": "text"}


def derive_config(
    task_id: str, header: Sequence[str], rows: Sequence[Row], sql: str
) -> dict[str, Any]:
    """The schema 1.0 evaluation config of a task.

    >>> cfg = derive_config("task_1", ["n"], [(3,)], "select count(*) as n from t")
    >>> cfg["order_sensitive"], cfg["columns"][0]["type"], cfg["columns"][0]["comparison"]
    (False, 'number', {'mode': 'integer'})
    """
    columns = []
    for index, name in enumerate(header):
        rule = column_rule([row[index] for row in rows])
        columns.append({"gold_index": index, "gold_name": name, **rule})
    return {
        "schema_version": CONFIG_SCHEMA_VERSION,
        "task_id": task_id,
        # Row order of a one-row answer is vacuous: only multi-row ordered answers count.
        "order_sensitive": order_sensitive(sql) and len(rows) > 1,
        "columns": columns,
    }


__all__ = ["CONFIG_SCHEMA_VERSION", "MAX_DECIMALS", "column_rule", "decimals", "derive_config"]
