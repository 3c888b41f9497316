"""Typed cell values in prose: their kinds, surface forms, parsing and text normalization.

A document must carry every source cell so that it can be read back exactly. Each cell has a
kind that says how its surface may look and how a surface is checked:

- ``identifier``: an integer id or key, written exactly as its digits (no separators);
- ``integer``: any other integer, digits with optional thousands separators;
- ``decimal``: a real number, written with exactly the decimals of its shortest repr
  (``151.0`` stays ``151.0``), optional thousands separators;
- ``date`` / ``datetime``: canonical ``YYYY-MM-DD[ HH:MM:SS]`` source text, written in one
  of several date styles (ISO, ``December 9, 2105``, ``2105年12月9日`` ...), compared after
  normalization;
- ``text``: everything else (codes, categories, names), written exactly.
"""

from __future__ import annotations

import logging
import re
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

logger = logging.getLogger(__name__)

KINDS = ("identifier", "integer", "decimal", "date", "datetime", "text")
DATE_STYLES = ("iso", "long", "day_first", "slash", "zh")

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH_NUM = {m.lower(): i for i, m in enumerate(MONTHS, start=1)}
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
_ID_NAME_RE = re.compile(r"(^|_)(id|code|no|num|key)$|id$|code$", re.I)
_CJK = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_CJK_RE = re.compile(f"[{_CJK}]")
_SPACE_NEAR_CJK = re.compile(f"(?<=[{_CJK}]) | (?=[{_CJK}])")

# A standalone number: not glued to letters, digits, underscores or a decimal point.
NUMBER_TOKEN = re.compile(
    r"(?<![0-9A-Za-z_.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![0-9A-Za-z_]|[.,]\d)"
)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds CJK characters.

    >>> has_cjk("患者 23070"), has_cjk("patient 23070")
    (True, False)
    """
    return bool(_CJK_RE.search(text))


def norm_text(text: str) -> str:
    r"""Whitespace-insensitive form used to find surfaces in Markdown and extracted PDF text.

    Runs of whitespace become one space, and spaces next to CJK characters are dropped, so a
    line break inside a Chinese sentence or a wrapped English phrase does not matter.

    >>> norm_text("event  142456\nhad 151.0\n iu/l")
    'event 142456 had 151.0 iu/l'
    >>> norm_text("患者 23070 的\n化验")
    '患者23070的化验'
    """
    return _SPACE_NEAR_CJK.sub("", " ".join(text.split()))


def column_kind(name: str, values: list[Any], *, is_key: bool = False) -> str:
    """The kind of a column from its name, key role and non-null values.

    >>> column_kind("SUBJECT_ID", [10006, 10011])
    'identifier'
    >>> column_kind("cost", [3, 12]), column_kind("valuenum", [1.5, 3])
    ('integer', 'decimal')
    >>> column_kind("charttime", ["2105-12-09 20:58:00"]), column_kind("dob", ["2035-03-20"])
    ('datetime', 'date')
    >>> column_kind("secucode", ["600180"])
    'text'
    """
    present = [v for v in values if v is not None]
    if not present:
        return "text"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "identifier" if is_key or _ID_NAME_RE.search(name) else "integer"
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "decimal"
    if all(isinstance(v, str) for v in present):
        if all(_DATE_RE.match(v) and _valid_date(v) for v in present):
            return "date"
        if all(_DATETIME_RE.match(v) and _valid_datetime(v) for v in present):
            return "datetime"
    return "text"


def cell_kind(column: str, value: Any) -> str:
    """The kind of one value of a column of kind ``column`` (mixed columns fall back).

    >>> cell_kind("decimal", 3), cell_kind("date", "n/a")
    ('decimal', 'text')
    """
    if column in ("identifier", "integer"):
        return (
            column
            if isinstance(value, int) and not isinstance(value, bool)
            else ("decimal" if isinstance(value, float) else "text")
        )
    if column == "decimal":
        return "decimal" if isinstance(value, int | float) else "text"
    if column == "date":
        return "date" if isinstance(value, str) and _DATE_RE.match(value) else "text"
    if column == "datetime":
        return "datetime" if isinstance(value, str) and _DATETIME_RE.match(value) else "text"
    return "text" if isinstance(value, str) else cell_kind("decimal", value)


def _valid_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _valid_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def decimal_text(value: float | int) -> str:
    """The plain decimal text of a number, keeping its shortest-repr precision.

    >>> decimal_text(151.0), decimal_text(1e-05), decimal_text(1.5e16), decimal_text(-2.25)
    ('151.0', '0.00001', '15000000000000000', '-2.25')
    """
    if isinstance(value, int):
        return str(value)
    d = Decimal(repr(value))
    text = format(d, "f")
    if "." not in text and "." in repr(value) and "e" not in repr(value):
        text += ".0"
    return text


def _group(digits: str) -> str:
    sign = "-" if digits.startswith("-") else ""
    whole, _, frac = digits.lstrip("-").partition(".")
    grouped = f"{int(whole):,}" if whole else whole
    return sign + grouped + (f".{frac}" if frac else "")


def format_value(value: Any, kind: str, *, date_style: str = "iso", thousands: bool = False) -> str:
    """The surface of a value in prose.

    >>> format_value(15000000, "integer", thousands=True)
    '15,000,000'
    >>> format_value(151.0, "decimal"), format_value(23070, "identifier", thousands=True)
    ('151.0', '23070')
    >>> format_value("2105-12-09 20:58:00", "datetime", date_style="long")
    'December 9, 2105, at 20:58:00'
    >>> format_value("2105-12-09", "date", date_style="zh")
    '2105年12月9日'
    """
    if kind == "identifier":
        return str(value)
    if kind in ("integer", "decimal"):
        text = decimal_text(value)
        return _group(text) if thousands and abs(value) >= 10000 else text
    if kind in ("date", "datetime"):
        day = date.fromisoformat(str(value)[:10])
        clock = str(value)[11:] if kind == "datetime" else ""
        if date_style == "long":
            body = f"{MONTHS[day.month - 1]} {day.day}, {day.year}"
            return f"{body}, at {clock}" if clock else body
        if date_style == "day_first":
            body = f"{day.day} {MONTHS[day.month - 1]} {day.year}"
            return f"{body} at {clock}" if clock else body
        if date_style == "slash":
            body = f"{day.year}/{day.month:02d}/{day.day:02d}"
            return f"{body} {clock}" if clock else body
        if date_style == "zh":
            body = f"{day.year}年{day.month}月{day.day}日"
            return f"{body} {clock}" if clock else body
        return str(value)
    return str(value)


_LONG_DATE = re.compile(
    r"^(?P<month>[A-Za-z]+)\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<year>\d{4})"
    r"(?:,?\s+(?:at\s+)?(?P<clock>\d{2}:\d{2}:\d{2}))?$"
)
_DAY_FIRST = re.compile(
    r"^(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]+)\s+(?P<year>\d{4})"
    r"(?:,?\s+(?:at\s+)?(?P<clock>\d{2}:\d{2}:\d{2}))?$"
)
_NUMERIC_DATE = re.compile(
    r"^(?P<year>\d{4})[-/](?P<month>\d{1,2})[-/](?P<day>\d{1,2})"
    r"(?:[ T]+(?P<clock>\d{2}:\d{2}:\d{2}))?$"
)
_ZH_DATE = re.compile(
    r"^(?P<year>\d{4})年(?P<month>\d{1,2})月(?P<day>\d{1,2})日"
    r"(?:\s*(?P<clock>\d{2}:\d{2}:\d{2}))?$"
)


def parse_date_surface(surface: str) -> str | None:
    """A date surface back to ``YYYY-MM-DD[ HH:MM:SS]``, or None when it is not a date.

    >>> parse_date_surface("December 9th, 2105, at 20:58:00")
    '2105-12-09 20:58:00'
    >>> parse_date_surface("2105年12月9日"), parse_date_surface("9 December 2105")
    ('2105-12-09', '2105-12-09')
    >>> parse_date_surface("Smarch 9, 2105") is None
    True
    """
    text = " ".join(surface.split())
    for pattern in (_NUMERIC_DATE, _LONG_DATE, _DAY_FIRST, _ZH_DATE):
        m = pattern.match(text)
        if not m:
            continue
        month_raw = m.group("month")
        month = int(month_raw) if month_raw.isdigit() else _MONTH_NUM.get(month_raw.lower(), 0)
        try:
            day = date(int(m.group("year")), month, int(m.group("day")))
        except ValueError:
            return None
        clock = m.group("clock")
        return f"{day.isoformat()} {clock}" if clock else day.isoformat()
    return None


def parse_surface(surface: str, kind: str) -> Any:
    """The typed value a surface states, for a cell of ``kind``.

    Raises:
        ValueError: the surface does not state a value of that kind.

    >>> parse_surface("15,000,000", "integer"), parse_surface("151.0", "decimal")
    (15000000, 151.0)
    >>> parse_surface("December 9, 2105", "date")
    '2105-12-09'
    >>> parse_surface("1,234", "identifier")
    Traceback (most recent call last):
    ...
    ValueError: identifier '1,234' must be written as plain digits
    """
    text = surface.strip()
    if kind == "identifier":
        if not re.fullmatch(r"[-+]?\d+", text):
            raise ValueError(f"identifier {surface!r} must be written as plain digits")
        return int(text)
    if kind in ("integer", "decimal"):
        if not re.fullmatch(r"[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?", text):
            raise ValueError(f"{surface!r} is not a plain number")
        clean = text.replace(",", "")
        if kind == "integer":
            if "." in clean:
                raise ValueError(f"{surface!r} is not an integer")
            return int(clean)
        try:
            return float(Decimal(clean))
        except InvalidOperation:  # pragma: no cover - the regex admits only numbers
            raise ValueError(f"{surface!r} is not a number") from None
    if kind in ("date", "datetime"):
        parsed = parse_date_surface(text)
        if parsed is None:
            raise ValueError(f"{surface!r} is not a date")
        return parsed
    return surface


def check_surface(surface: str, value: Any, kind: str) -> str | None:
    """Why ``surface`` does not state ``value`` exactly (type, precision, date), or None.

    >>> check_surface("151", 151.0, "decimal")
    "'151' drops precision: the source value is 151.0"
    >>> check_surface("152.0", 151.0, "decimal")
    "'152.0' states 152.0, the source value is 151.0"
    >>> check_surface("December 9, 2105", "2105-12-09", "date") is None
    True
    """
    try:
        got = parse_surface(surface, kind)
    except ValueError as exc:
        return str(exc)
    if kind == "decimal":
        want = decimal_text(value)
        digits = len(want.partition(".")[2])
        have = len(surface.strip().replace(",", "").partition(".")[2])
        if have != digits:
            return f"{surface!r} drops precision: the source value is {want}"
        if Decimal(surface.strip().replace(",", "")) != Decimal(want):
            return f"{surface!r} states {got!r}, the source value is {want}"
        return None
    if kind == "text":
        return None if surface == value else f"{surface!r} differs from the source {value!r}"
    if got != value:
        return f"{surface!r} states {got!r}, the source value is {value!r}"
    return None


def recovered_value(surface: str, kind: str, source_type: type) -> Any:
    """The value read back from a surface, in the Python type SQLite gave the source.

    >>> recovered_value("151.0", "decimal", float), recovered_value("3", "decimal", int)
    (151.0, 3)
    """
    value = parse_surface(surface, kind)
    if kind == "decimal" and source_type is int:
        return int(Decimal(surface.strip().replace(",", "")))
    return value


__all__ = [
    "DATE_STYLES",
    "KINDS",
    "MONTHS",
    "NUMBER_TOKEN",
    "cell_kind",
    "check_surface",
    "column_kind",
    "decimal_text",
    "format_value",
    "has_cjk",
    "norm_text",
    "parse_date_surface",
    "parse_surface",
    "recovered_value",
]
