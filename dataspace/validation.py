"""Reading a mapping from outside (a spec, a models file) with the key path in every error.

>>> Reader("spec.yaml").positive_int(0, "attempts")
Traceback (most recent call last):
...
dataspace.errors.ConfigError: spec.yaml: attempts: must be a positive integer, got 0
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, NoReturn

from dataspace.errors import ConfigError


class Reader:
    """Typed reads of one source's values.

    A bad value raises ``ConfigError`` naming ``<source>: <key>`` and what it must be.
    """

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> NoReturn:
        """Raise the error for ``key``."""
        raise ConfigError(f"{self.source}: {key}: {problem}")

    def mapping(self, v: object, key: str) -> dict[str, Any]:
        """``v`` as a dict."""
        if not isinstance(v, Mapping):
            self.fail(key, f"must be a mapping, got {type(v).__name__}")
        return dict(v)

    def no_extra(self, d: Mapping[str, Any], allowed: set[str], key: str) -> None:
        """Refuse a key of ``d`` outside ``allowed`` (suggesting the closest one)."""
        extra = sorted(set(d) - allowed, key=str)
        if not extra:
            return
        bad = extra[0]
        where = bad if key == "spec" else f"{key}.{bad}"
        close = difflib.get_close_matches(str(bad), sorted(allowed), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        more = f" (also unknown: {extra[1:]})" if extra[1:] else ""
        self.fail(where, f"unknown key; {hint}allowed: {sorted(allowed)}{more}")

    def string(self, v: object, key: str) -> str:
        """A non-empty string."""
        if not isinstance(v, str) or not v.strip():
            self.fail(key, f"must be a non-empty string, got {v!r}")
        return v

    def optional_string(self, v: object, key: str) -> str | None:
        """A non-empty string or None."""
        return None if v is None else self.string(v, key)

    def number(self, v: object, key: str) -> float:
        """A non-negative number."""
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
            self.fail(key, f"must be a non-negative number, got {v!r}")
        return float(v)

    def positive(self, v: object, key: str, *, maximum: float | None = None) -> float:
        """A positive number, at most ``maximum``."""
        x = self.number(v, key)
        if x <= 0:
            self.fail(key, f"must be positive, got {v!r}")
        if maximum is not None and x > maximum:
            self.fail(key, f"{v!r} is more than the largest accepted value, {maximum:g}")
        return x

    def positive_int(
        self, v: object, key: str, *, allow_zero: bool = False, maximum: int | None = None
    ) -> int:
        """A positive (or, with ``allow_zero``, non-negative) integer, at most ``maximum``."""
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if allow_zero else 1):
            self.fail(
                key, f"must be a {'non-negative' if allow_zero else 'positive'} integer, got {v!r}"
            )
        if maximum is not None and v > maximum:
            self.fail(key, f"{v!r} is more than the largest accepted value, {maximum}")
        return v


__all__ = ["Reader"]
