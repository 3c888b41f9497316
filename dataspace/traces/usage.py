"""Model usage: an attempt's running totals, and the fields a trace and a results row share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
)
"""The usage fields of a ``model_call`` event, summed into the attempt's results row."""


@dataclass(kw_only=True)
class Usage:
    """Model usage of one attempt. Cached tokens are part of input, reasoning part of output."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0
    model_seconds: float = 0.0
    retries: int = 0
    retry_seconds: float = 0.0
    queue_seconds: float = 0.0

    def add(self, other: Usage) -> None:
        """Accumulate another usage record into this one."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def as_number(v: Any) -> float | None:
    """``v`` as a float when it is a real number (not a bool, not NaN), else None.

    >>> as_number(3), as_number(True), as_number(float("nan")), as_number("1")
    (3.0, None, None, None)
    """
    kind = type(v)
    if kind is float:
        return v if v == v else None  # NaN is no number
    if kind is int:
        return float(v)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if v == v else None


def usage_matches(totals: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """The usage fields where a trace's turn totals differ from the results row.

    >>> usage_matches({"input_tokens": 5.0}, {"input_tokens": 5, "output_tokens": 1})
    []
    >>> usage_matches({"input_tokens": 4.0}, {"input_tokens": 5})
    ['input_tokens']
    """
    out = []
    for k in USAGE_FIELDS:
        a, b = as_number(totals.get(k)), as_number(row.get(k))
        if a is None or b is None:
            continue
        if abs(a - b) > (1e-9 if k == "cost_usd" else 0.5):
            out.append(k)
    return out


__all__ = ["USAGE_FIELDS", "Usage", "as_number", "usage_matches"]
