"""SQL dialect fixes that make source SQL run deterministically on SQLite.

Each fix is a small pure function over the SQL text. They work on tokens (string literals,
quoted identifiers, comments, words, punctuation), so a fix never touches the inside of a
string literal unless that literal is exactly what it is meant to change. ``normalize_sql``
applies them in order and reports which ones changed the text.

- ``replace_current_time``: EHRSQL's bare ``current_time`` placeholder becomes a fixed
  timestamp literal (in SQLite ``current_time`` is a real keyword and silently gives the
  wall-clock time).
- ``fix_strftime_formats``: ``%y``/``%j`` inside ``strftime`` formats become ``%Y``/``%J``.
- ``pin_now``: the ``'now'`` argument of SQLite date functions becomes a pinned date.
- ``backticks_to_double_quotes``: MySQL-quoted identifiers become SQL-standard ones.
- ``strip_trailing_semicolons``: ``select 1;`` becomes ``select 1``.
- ``replace_vital_ranges``: EHRSQL's vital-sign placeholders (``heart_rate_lower`` ...)
  become the normal-range bounds EHRSQL itself substitutes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

logger = logging.getLogger(__name__)

DEFAULT_CURRENT_TIME = "2105-12-31 23:59:00"
"""EHRSQL's fixed "now" for its MIMIC databases."""

DEFAULT_NOW = "2022-12-31"
"""The date ``'now'`` is pinned to unless configured otherwise."""

DATE_FUNCTIONS = frozenset(
    {"date", "time", "datetime", "julianday", "strftime", "unixepoch", "timediff"}
)

_TOKEN_RE = re.compile(
    r"""
    (?P<str>'(?:[^']|'')*'?)
    |(?P<qid>"(?:[^"]|"")*"?)
    |(?P<bt>`(?:[^`]|``)*`?)
    |(?P<br>\[[^\]]*\]?)
    |(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
    |(?P<word>[^\W\d]\w*)
    |(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
    |(?P<ws>\s+)
    |(?P<other>.)
    """,
    re.S | re.X,
)


class Token(NamedTuple):
    """One lexical token of a SQL text."""

    kind: str
    text: str


def tokenize(sql: str) -> list[Token]:
    """Split SQL into tokens; joining their texts gives the input back.

    >>> [t.text for t in tokenize("select 'a''b' from `t`;") if t.kind != "ws"]
    ['select', "'a''b'", 'from', '`t`', ';']
    """
    out: list[Token] = []
    for m in _TOKEN_RE.finditer(sql):
        kind = m.lastgroup or "other"
        out.append(Token(kind, m.group()))
    return out


def _join(tokens: list[Token]) -> str:
    return "".join(t.text for t in tokens)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _unquote(literal: str) -> str:
    return literal[1:-1].replace("''", "'")


def _significant(tokens: list[Token], start: int, step: int) -> int | None:
    """Index of the next token from ``start`` (in direction ``step``) that is not blank."""
    i = start
    while 0 <= i < len(tokens):
        if tokens[i].kind not in ("ws", "comment"):
            return i
        i += step
    return None


def replace_current_time(sql: str, timestamp: str = DEFAULT_CURRENT_TIME) -> str:
    """Replace the bare ``current_time`` placeholder by a fixed timestamp literal.

    Occurrences inside string literals, quoted identifiers or after a dot are left alone.

    >>> replace_current_time("select datetime(current_time) where x = 'current_time'")
    "select datetime('2105-12-31 23:59:00') where x = 'current_time'"
    """
    tokens = tokenize(sql)
    for i, tok in enumerate(tokens):
        if tok.kind != "word" or tok.text.lower() != "current_time":
            continue
        prev = _significant(tokens, i - 1, -1)
        if prev is not None and tokens[prev].text == ".":
            continue
        tokens[i] = Token("str", _quote(timestamp))
    return _join(tokens)


def _fix_format(fmt: str) -> str:
    # Walk %-pairs so that "%%y" (a literal percent sign then "y") stays as it is.
    return re.sub(
        r"%(.)", lambda m: {"y": "%Y", "j": "%J"}.get(m.group(1), m.group()), fmt, flags=re.S
    )


def fix_strftime_formats(sql: str) -> str:
    """Use ``%Y`` and ``%J`` in strftime formats (EHRSQL writes ``%y`` and ``%j``).

    >>> fix_strftime_formats("select strftime('%y-%j', t) where n = '%y'")
    "select strftime('%Y-%J', t) where n = '%y'"
    """
    tokens = tokenize(sql)
    for i, tok in enumerate(tokens):
        if tok.kind != "word" or tok.text.lower() != "strftime":
            continue
        paren = _significant(tokens, i + 1, 1)
        if paren is None or tokens[paren].text != "(":
            continue
        fmt = _significant(tokens, paren + 1, 1)
        if fmt is None or tokens[fmt].kind != "str" or len(tokens[fmt].text) < 2:
            continue
        tokens[fmt] = Token("str", _quote(_fix_format(_unquote(tokens[fmt].text))))
    return _join(tokens)


def pin_now(sql: str, now: str = DEFAULT_NOW) -> str:
    """Replace the ``'now'`` argument of SQLite date functions by a pinned date.

    >>> pin_now("select date('now', '-1 year'), 'now' from t", now="2022-12-31")
    "select date('2022-12-31', '-1 year'), 'now' from t"
    """
    tokens = tokenize(sql)
    stack: list[str | None] = []
    for i, tok in enumerate(tokens):
        if tok.text == "(":
            prev = _significant(tokens, i - 1, -1)
            name = (
                tokens[prev].text.lower()
                if prev is not None and tokens[prev].kind == "word"
                else None
            )
            stack.append(name)
        elif tok.text == ")":
            if stack:
                stack.pop()
        elif (
            tok.kind == "str"
            and len(tok.text) >= 2
            and _unquote(tok.text).lower() == "now"
            and stack
            and stack[-1] in DATE_FUNCTIONS
        ):
            tokens[i] = Token("str", _quote(now))
    return _join(tokens)


def backticks_to_double_quotes(sql: str) -> str:
    """Turn MySQL backtick-quoted identifiers into double-quoted ones.

    >>> print(backticks_to_double_quotes("select `Close Price` from `qt` where a = '`'"))
    select "Close Price" from "qt" where a = '`'
    """
    tokens = tokenize(sql)
    for i, tok in enumerate(tokens):
        if tok.kind == "bt" and len(tok.text) >= 2 and tok.text.endswith("`"):
            inner = tok.text[1:-1].replace("``", "`")
            tokens[i] = Token("qid", '"' + inner.replace('"', '""') + '"')
    return _join(tokens)


def strip_trailing_semicolons(sql: str) -> str:
    r"""Remove trailing semicolons (and the blanks around them).

    >>> strip_trailing_semicolons("select 1 ; ;\n")
    'select 1'
    """
    tokens = tokenize(sql)
    end = len(tokens)
    while end and (tokens[end - 1].kind == "ws" or tokens[end - 1].text == ";"):
        end -= 1
    if end == len(tokens):
        return sql
    return _join(tokens[:end])


VITAL_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (35.5, 38.1),
    "sao2": (95.0, 100.0),
    "heart_rate": (60.0, 100.0),
    "respiration": (12.0, 18.0),
    "systolic_bp": (90.0, 120.0),
    "diastolic_bp": (60.0, 90.0),
    "mean_bp": (60.0, 110.0),
}
"""EHRSQL's normal ranges for its ``<vital>_lower`` / ``<vital>_upper`` placeholders."""


def replace_vital_ranges(sql: str) -> str:
    """Replace EHRSQL's ``<vital>_lower``/``<vital>_upper`` placeholders by their bounds.

    Only the known placeholders are replaced, and never inside literals or after a dot.

    >>> replace_vital_ranges("select 1 where v between heart_rate_lower and heart_rate_upper")
    'select 1 where v between 60.0 and 100.0'
    """
    tokens = tokenize(sql)
    for i, tok in enumerate(tokens):
        if tok.kind != "word":
            continue
        name, _, bound = tok.text.lower().rpartition("_")
        if bound not in ("lower", "upper") or name not in VITAL_RANGES:
            continue
        prev = _significant(tokens, i - 1, -1)
        if prev is not None and tokens[prev].text == ".":
            continue
        low, high = VITAL_RANGES[name]
        tokens[i] = Token("num", repr(low if bound == "lower" else high))
    return _join(tokens)


@dataclass(frozen=True, kw_only=True)
class DialectOptions:
    """Values the fixes substitute.

    Attributes:
        current_time: what EHRSQL's ``current_time`` placeholder stands for.
        now: the date ``'now'`` is pinned to.
    """

    current_time: str = DEFAULT_CURRENT_TIME
    now: str = DEFAULT_NOW


class Normalized(NamedTuple):
    """The fixed SQL and the names of the fixes that changed it."""

    sql: str
    fixes: tuple[str, ...]


_Rule = Callable[[str, DialectOptions], str]

RULES: tuple[tuple[str, _Rule], ...] = (
    ("strip_trailing_semicolons", lambda s, o: strip_trailing_semicolons(s)),
    ("backticks_to_double_quotes", lambda s, o: backticks_to_double_quotes(s)),
    ("replace_current_time", lambda s, o: replace_current_time(s, o.current_time)),
    ("fix_strftime_formats", lambda s, o: fix_strftime_formats(s)),
    ("pin_now", lambda s, o: pin_now(s, o.now)),
    ("replace_vital_ranges", lambda s, o: replace_vital_ranges(s)),
)


def normalize_sql(sql: str, options: DialectOptions | None = None) -> Normalized:
    """Apply every fix in ``RULES`` and report which ones changed the SQL.

    >>> fixed = normalize_sql("select strftime('%y', current_time);")
    >>> print(fixed.sql)
    select strftime('%Y', '2105-12-31 23:59:00')
    >>> fixed.fixes
    ('strip_trailing_semicolons', 'replace_current_time', 'fix_strftime_formats')
    """
    opts = options or DialectOptions()
    applied: list[str] = []
    out = sql.strip()
    for name, rule in RULES:
        fixed = rule(out, opts)
        if fixed != out:
            applied.append(name)
            out = fixed
    return Normalized(out, tuple(applied))


__all__ = [
    "DATE_FUNCTIONS",
    "DEFAULT_CURRENT_TIME",
    "DEFAULT_NOW",
    "VITAL_RANGES",
    "DialectOptions",
    "Normalized",
    "Token",
    "backticks_to_double_quotes",
    "fix_strftime_formats",
    "normalize_sql",
    "pin_now",
    "replace_current_time",
    "replace_vital_ranges",
    "strip_trailing_semicolons",
    "tokenize",
]
