"""Argument types for the command lines: every numeric flag is range-checked.

A value out of range is refused by argparse with exit code 2 and one line naming the
flag (``argument --concurrency: must be at least 1, got 0``), before anything runs.

>>> counted = int_range(1)
>>> counted("3")
3
>>> try:
...     counted("0")
... except argparse.ArgumentTypeError as exc:
...     print(exc)
must be at least 1, got 0
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def float_range(
    low: float, high: float | None = None, *, open_low: bool = False
) -> Callable[[str], float]:
    """An argparse type: a finite number in ``[low, high]`` (``(low, high]`` with ``open_low``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
        if value < low or (open_low and value == low):
            word = "more than" if open_low else "at least"
            raise argparse.ArgumentTypeError(f"must be {word} {low:g}, got {text}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:g}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


POSITIVE_INT = int_range(1)
"""A count of things that must exist (concurrency, an attempt number, workers)."""
NON_NEGATIVE_INT = int_range(0)
"""A count that may be zero (a seed, a limit of listed items)."""
PORT = int_range(0, 65535)
"""A TCP port (0: any free one)."""

__all__ = ["NON_NEGATIVE_INT", "PORT", "POSITIVE_INT", "float_range", "int_range"]
