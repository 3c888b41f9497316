"""Canonical cell values: one rule per column type.

A canonical value is ``NULL`` (shared by every type), a ``str`` (text, number, date and
datetime) or a ``bool``. Values are only ever compared within one gold column, where both
sides went through that column's rule, so they need no type tag. A cell that does not fit
its rule raises :class:`CellError`.

Decimal arithmetic follows the protocol: precision 100 with ROUND_HALF_UP for rounding, and
a ``%`` in a ``fraction`` column divided by 100 in Python's default context (precision 28).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, time
from decimal import (
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)
from itertools import repeat
from operator import methodcaller, ne
from typing import Final

from evaluator.config import ColumnSpec

logger = logging.getLogger(__name__)

NULL_TOKENS: Final = frozenset({"", "null", "none", "nan", "nat", "<na>"})
TRUE_TOKENS: Final = frozenset({"1", "true", "yes", "y", "是"})
FALSE_TOKENS: Final = frozenset({"0", "false", "no", "n", "否"})

# ``\d`` is Unicode-aware on purpose: ``Decimal`` accepts every Unicode decimal digit.
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?:[eE][+-]?\d+)?$")
_PLAIN = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_SHORT_ASCII_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")
_SHORT_ASCII_DECIMAL = re.compile(r"[+-]?[0-9]{0,30}\.[0-9]{1,30}")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
# Bulk fast paths (see canonicalize_many): cells these match take no per-cell checks.
_ASCII_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_FIXED_POINT = r"[+-]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})"
_ASCII_FIXED_POINT = re.compile(_FIXED_POINT)
_ALL_ASCII_FIXED_POINT = re.compile(rf"(?:{_FIXED_POINT}\x00)*{_FIXED_POINT}")
_EDGE_SPACE = re.compile(r"(?:^|\x00)\s|\s(?:\x00|$)")

_TRAPS = [InvalidOperation, DivisionByZero, Overflow]
# Python's default context, fixed here so a caller's context never changes a verdict.
_DEFAULT_CONTEXT = Context(
    prec=28, rounding=ROUND_HALF_EVEN, Emin=-999999, Emax=999999, traps=_TRAPS
)
_ROUNDING_CONTEXT = Context(
    prec=100, rounding=ROUND_HALF_EVEN, Emin=-999999, Emax=999999, traps=_TRAPS
)
_HUNDRED = Decimal(100)
_ONE = Decimal(1)


class _Null:
    """The canonical NULL: equal only to itself, whatever the column type."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL"

    def __reduce__(self) -> str:
        return "NULL"


NULL: Final = _Null()

Canonical = _Null | str | bool


class CellError(ValueError):
    """A cell cannot be read under its column's rule."""


def canonical_text(text: str) -> Canonical:
    r"""Text: CR/CRLF to LF, ``str.strip()``, NFC; empty is NULL; case-sensitive.

    >>> canonical_text("  Cafe\u0301\u3000")
    'Café'
    >>> canonical_text(" \r\n ")
    NULL
    """
    value = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n").strip())
    return value if value else NULL


def _decimal_text(value: Decimal) -> str:
    if value == 0:
        return "0"
    rendered = format(value, "f")
    if "." in rendered:
        rendered = rendered.rstrip("0").rstrip(".")
    return rendered


def canonical_number(
    text: str,
    *,
    mode: str,
    digits: int | None = None,
    unit: str = "plain",
    allow_percent_sign: bool = False,
    gold_index: int = 0,
) -> Canonical:
    """Number: strict syntax, optional ``%`` and thousands separators, then precision.

    Args:
        text: the raw cell.
        mode: ``integer``, ``decimal_places`` or ``significant_digits``.
        digits: the number of places or significant digits (rounding modes).
        unit: ``plain``, ``percentage_points`` or ``fraction`` (``15%`` means 0.15).
        allow_percent_sign: whether a trailing ``%`` is accepted.
        gold_index: the gold column, for error messages.

    >>> canonical_number("6.045", mode="decimal_places", digits=2)
    '6.05'
    >>> canonical_number("99950", mode="significant_digits", digits=3)
    '100000'
    >>> canonical_number("1,234.50", mode="decimal_places", digits=1)
    '1234.5'
    >>> canonical_number("15%", mode="decimal_places", digits=4, unit="fraction",
    ...                  allow_percent_sign=True)
    '0.15'
    >>> canonical_number("1e2", mode="integer")
    '100'
    """
    value = text.strip()
    if value.casefold() in NULL_TOKENS:
        return NULL
    percent = value.endswith("%")
    if percent:
        if not allow_percent_sign:
            raise CellError(f"Percent sign is not allowed for gold column {gold_index}")
        value = value[:-1].strip()
    if "," in value:
        if not _THOUSANDS.fullmatch(value):
            raise CellError(f"Invalid thousands separators in number: {text!r}")
        value = value.replace(",", "")
    if not _PLAIN.fullmatch(value):
        raise CellError(f"Invalid number: {text!r}")

    fraction = percent and unit == "fraction"
    if not fraction and _SHORT_ASCII_INTEGER.fullmatch(value):
        # Whole numbers need no rounding unless they have more significant digits than
        # kept; this skips Decimal for the most common cells.
        whole = int(value)
        if mode != "significant_digits" or len(str(abs(whole))) <= (digits or 0):
            return str(whole)
    try:
        number = Decimal(value)
    except ArithmeticError as exc:
        raise CellError(f"Invalid number: {text!r}") from exc
    if fraction:
        try:
            number = _DEFAULT_CONTEXT.divide(number, _HUNDRED)
        except ArithmeticError as exc:
            raise CellError(f"Number out of range: {text!r}") from exc
    return _rounded(number, text, mode, digits, gold_index)


def _rounded(number: Decimal, text: str, mode: str, digits: int | None, gold_index: int) -> str:
    """Apply the comparison mode to a parsed number and render it canonically."""
    try:
        if mode == "integer":
            integral = number.to_integral_value(context=_ROUNDING_CONTEXT)
            if number != integral:
                raise CellError(f"Expected an integer for gold column {gold_index}: {text!r}")
            number = integral
        elif mode == "decimal_places":
            quantum = _ONE.scaleb(-(digits or 0), context=_ROUNDING_CONTEXT)
            number = number.quantize(quantum, rounding=ROUND_HALF_UP, context=_ROUNDING_CONTEXT)
        elif mode == "significant_digits":
            if number != 0:
                quantum = _ONE.scaleb(
                    number.adjusted() - (digits or 0) + 1, context=_ROUNDING_CONTEXT
                )
                number = number.quantize(quantum, rounding=ROUND_HALF_UP, context=_ROUNDING_CONTEXT)
        else:
            raise ValueError(f"unknown comparison mode {mode!r}")
    except ArithmeticError as exc:
        # Beyond precision 100 or the exponent range: the official evaluator crashes here.
        raise CellError(f"Number out of range: {text!r}") from exc
    return _decimal_text(number)


def number_converter(
    *,
    mode: str,
    digits: int | None = None,
    unit: str = "plain",
    allow_percent_sign: bool = False,
    gold_index: int = 0,
) -> Callable[[str], Canonical]:
    """:func:`canonical_number` with its options bound, and fast paths for plain cells.

    >>> number_converter(mode="decimal_places", digits=1)("-2.25")
    '-2.3'
    """
    keep_whole = mode != "significant_digits"
    kept = digits or 0

    def convert(text: str) -> Canonical:
        # Plain ASCII cells skip the whitespace, null, percent and separator checks that
        # they would pass anyway.
        if _SHORT_ASCII_INTEGER.fullmatch(text):
            whole = int(text)
            if keep_whole or len(str(abs(whole))) <= kept:
                return str(whole)
        elif _SHORT_ASCII_DECIMAL.fullmatch(text):
            return _rounded(Decimal(text), text, mode, digits, gold_index)
        return canonical_number(
            text,
            mode=mode,
            digits=digits,
            unit=unit,
            allow_percent_sign=allow_percent_sign,
            gold_index=gold_index,
        )

    return convert


def _parse_iso(text: str) -> datetime:
    candidate = text.strip().replace("Z", "+00:00")
    try:
        if _DATE_ONLY.fullmatch(candidate):
            return datetime.combine(date.fromisoformat(candidate), time.min)
        return datetime.fromisoformat(candidate)
    except (ValueError, OverflowError) as exc:
        raise CellError(f"Invalid ISO date/datetime: {text!r}") from exc


def _to_utc(value: datetime, text: str) -> datetime:
    try:
        return value.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        # Year 1 or 9999 shifted out of range: the official evaluator crashes here.
        raise CellError(f"Invalid ISO date/datetime: {text!r}") from exc


def canonical_date(text: str) -> Canonical:
    """Date: ISO date, or a datetime at midnight (aware values converted to UTC first).

    >>> canonical_date("2024-03-01T00:00:00Z")
    '2024-03-01'
    >>> canonical_date("20240301")
    '2024-03-01'
    """
    stripped = text.strip()
    if stripped.casefold() in NULL_TOKENS:
        return NULL
    parsed = _parse_iso(stripped)
    if parsed.tzinfo is not None:
        parsed = _to_utc(parsed, stripped).replace(tzinfo=None)
    if parsed.time() != time.min:
        raise CellError(f"Expected a date or midnight datetime, got: {text!r}")
    return parsed.date().isoformat()


def canonical_datetime(text: str) -> Canonical:
    """Datetime: aware values in UTC with a ``Z``; naive values as they are.

    >>> canonical_datetime("2024-03-01 08:30+08:00")
    '2024-03-01T00:30:00Z'
    >>> canonical_datetime("2024-03-01")
    '2024-03-01T00:00:00'
    """
    stripped = text.strip()
    if stripped.casefold() in NULL_TOKENS:
        return NULL
    parsed = _parse_iso(stripped)
    if parsed.tzinfo is not None:
        return _to_utc(parsed, stripped).isoformat().replace("+00:00", "Z")
    return parsed.isoformat()


def canonical_boolean(text: str) -> Canonical:
    """Boolean: ``1 true yes y 是`` and ``0 false no n 否``, case-insensitive.

    >>> canonical_boolean(" YES "), canonical_boolean("否"), canonical_boolean("none")
    (True, False, NULL)
    """
    value = text.strip().casefold()
    if value in NULL_TOKENS:
        return NULL
    if value in TRUE_TOKENS:
        return True
    if value in FALSE_TOKENS:
        return False
    raise CellError(f"Invalid boolean: {text!r}")


Converter = Callable[[str], Canonical]


def converter(column: ColumnSpec) -> Converter:
    """The function that canonicalizes one raw cell under ``column``'s rule."""
    if column.type == "text":
        return canonical_text
    if column.type == "date":
        return canonical_date
    if column.type == "datetime":
        return canonical_datetime
    if column.type == "boolean":
        return canonical_boolean
    if column.type == "number":
        return number_converter(
            mode=column.comparison_mode or "",
            digits=column.comparison_digits,
            unit=column.unit,
            allow_percent_sign=column.allow_percent_sign,
            gold_index=column.gold_index,
        )
    raise ValueError(f"unsupported column type {column.type!r}")


class _Invalid:
    """Marks a cell that does not fit its rule, in bulk results."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Final = _Invalid()


def canonicalize_many(texts: Iterable[str], column: ColumnSpec) -> dict[str, Canonical | _Invalid]:
    """Canonicalize distinct cells under one rule; invalid cells map to ``INVALID``.

    Equal to calling :func:`canonicalize` on each cell, but plain cells (ASCII fixed-point
    numbers, ASCII ISO dates, text without edge spaces or CR) go through C-level loops.

    >>> spec = ColumnSpec(gold_index=0, gold_name="n", type="number",
    ...                   comparison_mode="decimal_places", comparison_digits=1)
    >>> canonicalize_many(["2.25", "-0.01", "x"], spec)
    {'2.25': '2.3', '-0.01': '0', 'x': INVALID}
    """
    todo = list(texts) if isinstance(texts, set | frozenset) else list(dict.fromkeys(texts))
    done: dict[str, Canonical | _Invalid] = {}
    fast = _BULK.get(column.type)
    if fast is not None and todo:
        todo = fast(todo, column, done)
    convert = converter(column)
    for text in todo:
        try:
            done[text] = convert(text)
        except CellError:
            done[text] = INVALID
    return done


def _bulk_text(
    texts: list[str], column: ColumnSpec, done: dict[str, Canonical | _Invalid]
) -> list[str]:
    joined = "\x00".join(texts)
    # No CR, no whitespace at either end of any cell, no NUL inside one: only NFC is left,
    # and NUL (a starter that never composes) keeps NFC from crossing cell boundaries.
    if "\r" in joined or joined.count("\x00") != len(texts) - 1 or _EDGE_SPACE.search(joined):
        return texts
    normalized = unicodedata.normalize("NFC", joined)
    values = texts if normalized == joined else normalized.split("\x00")
    done.update(zip(texts, [value if value else NULL for value in values], strict=True))
    return []


def _bulk_number(
    texts: list[str], column: ColumnSpec, done: dict[str, Canonical | _Invalid]
) -> list[str]:
    mode = column.comparison_mode
    if mode == "significant_digits":
        return texts
    joined = "\x00".join(texts)
    if _ALL_ASCII_FIXED_POINT.fullmatch(joined):
        plain = texts
    else:
        match = _ASCII_FIXED_POINT.fullmatch
        plain = [text for text in texts if match(text)]
        if not plain:
            return texts
        joined = "\x00".join(plain)
    if "." not in joined and mode != "significant_digits":
        rendered = list(map(str, map(int, plain)))  # whole numbers: rounding is a no-op
        done.update(zip(plain, rendered, strict=True))
        return [] if len(plain) == len(texts) else [t for t in texts if t not in done]
    numbers = list(map(Decimal, plain))
    if mode == "integer":
        integral = methodcaller("to_integral_value", context=_ROUNDING_CONTEXT)
        if any(map(ne, numbers, map(integral, numbers))):
            return texts  # some are not whole: let the per-cell path report them
        rendered = list(map(str, map(int, numbers)))
    else:
        quantum = _ONE.scaleb(-(column.comparison_digits or 0), context=_ROUNDING_CONTEXT)
        rounded = map(methodcaller("quantize", quantum, ROUND_HALF_UP, _ROUNDING_CONTEXT), numbers)
        rendered = list(map(format, rounded, repeat("f")))
        if column.comparison_digits:
            rendered = list(map(str.rstrip, map(str.rstrip, rendered, repeat("0")), repeat(".")))
    done.update(zip(plain, ["0" if r == "-0" else r for r in rendered], strict=True))
    if len(plain) == len(texts):
        return []
    return [text for text in texts if text not in done]


def _bulk_date(
    texts: list[str], column: ColumnSpec, done: dict[str, Canonical | _Invalid]
) -> list[str]:
    match = _ASCII_DATE.fullmatch
    plain = [text for text in texts if match(text)]
    try:
        days = list(map(date.fromisoformat, plain))
    except ValueError:
        return texts  # an impossible date: let the per-cell path report it
    rendered = list(map(date.isoformat, days))
    if column.type == "datetime":
        rendered = [day + "T00:00:00" for day in rendered]
    done.update(zip(plain, rendered, strict=True))
    if len(plain) == len(texts):
        return []
    return [text for text in texts if text not in done]


_BULK: dict[str, Callable[[list[str], ColumnSpec, dict[str, Canonical | _Invalid]], list[str]]] = {
    "text": _bulk_text,
    "number": _bulk_number,
    "date": _bulk_date,
    "datetime": _bulk_date,
}


def canonicalize(text: str, column: ColumnSpec) -> Canonical:
    """Canonicalize one cell under a column's rule.

    Raises:
        CellError: the cell does not fit the rule.
    """
    return converter(column)(text)


__all__ = [
    "INVALID",
    "NULL",
    "Canonical",
    "CellError",
    "Converter",
    "canonical_boolean",
    "canonical_date",
    "canonical_datetime",
    "canonical_number",
    "canonical_text",
    "canonicalize",
    "canonicalize_many",
    "converter",
    "number_converter",
]
