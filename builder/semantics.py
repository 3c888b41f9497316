"""Task semantics a solver cannot guess, stated in the question in its own language.

- **A fixed "now".** SQL that computes relative to a pinned timestamp (EHRSQL's
  ``2105-12-31 23:59:00``, BULL's pinned ``'now'``) gets a sentence giving that timestamp.
- **Ties past N.** A rank-limited question (``dense_rank() ... <= N``) whose gold has more
  than N rows states the tie rule; one with more than ``max_tie_factor`` × N rows is
  rejected (a "top 4" with 233 rows is not a top-4 question).
- **Requested order.** With ``order_share`` > 0, a seeded share of multi-row answers whose
  SQL leaves the order open gets an ORDER BY over its output columns and a sentence
  asking for that order; the evaluation config then compares rows in order.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from builder.dialect import DEFAULT_CURRENT_TIME, DEFAULT_NOW

_RANK = re.compile(r"\b(?:dense_rank|rank)\s*\(\s*\)\s*over\s*\(.*?\)\s*as\s+(\w+)", re.I | re.S)


@dataclass(frozen=True, kw_only=True)
class SemanticsOptions:
    """How task semantics are stated.

    Attributes:
        state_now: state the fixed "now" the SQL depends on.
        tie_rule: state the tie rule of rank-limited answers longer than N.
        max_tie_factor: reject a rank-limited answer with more than this many times N rows.
        order_share: share of eligible multi-row answers given a requested order (the
            paper's release has 92 order-sensitive tasks of 410, 22%).
    """

    state_now: bool = True
    tie_rule: bool = True
    max_tie_factor: float = 3.0
    order_share: float = 0.35

    def __post_init__(self) -> None:
        from dataspace.errors import ConfigError

        if not 0.0 <= self.order_share <= 1.0:
            raise ConfigError(
                f"semantics.order_share must be between 0 and 1, not {self.order_share}"
            )
        if self.max_tie_factor < 1.0:
            raise ConfigError(
                f"semantics.max_tie_factor must be at least 1, not {self.max_tie_factor}"
            )


def pinned_now(sql: str, extra_now: tuple[str, ...] = ()) -> str | None:
    """The pinned timestamp the SQL computes relative to, or None.

    >>> pinned_now("select 1 where datetime(t.x) >= datetime('2105-12-31 23:59:00','-1 year')")
    '2105-12-31 23:59:00'
    >>> pinned_now("select '2105-12-31 23:59:00' = 'x'") is None
    False
    >>> pinned_now("select 1") is None
    True
    """
    for stamp in (DEFAULT_CURRENT_TIME, DEFAULT_NOW, *extra_now):
        if stamp and f"'{stamp}'" in sql:
            return stamp
    return None


def now_sentence(stamp: str, language: str) -> str:
    """The sentence stating the fixed "now".

    >>> now_sentence("2105-12-31 23:59:00", "zh")
    '（以2105-12-31 23:59:00为当前时间。）'
    """
    if language == "zh":
        return f"（以{stamp}为当前时间。）"
    return f"(Take the current time to be {stamp}.)"


def rank_limit(sql: str) -> int | None:
    """N of a rank-limited query (``rank_column <= N``), or None.

    >>> rank_limit("select a from (select a, dense_rank() over (order by count(*) desc) "
    ...            "as c1 from t group by a) as t1 where t1.c1 <= 3")
    3
    """
    m = _RANK.search(sql)
    if not m:
        return None
    cut = re.search(rf"\b\w+\.{re.escape(m.group(1))}\s*(<=|<)\s*(\d+)", sql, re.I)
    if not cut:
        return None
    n = int(cut.group(2))
    return n - 1 if cut.group(1) == "<" else n


def tie_sentence(n: int, language: str) -> str:
    """The sentence stating the tie rule of a top-N answer."""
    if language == "zh":
        return f"（排名并列时名次相同，并列者全部列出，因此结果可能多于{n}项。）"
    return (
        f"(Ties share a rank and are all listed, so the answer may have more than {n} "
        f"{'row' if n == 1 else 'rows'}.)"
    )


def order_sentence(kind: str, language: str) -> str:
    """The sentence asking for ascending order of the answer's rows."""
    if language == "zh":
        return {
            "time": "（结果按时间从早到晚排列。）",
            "number": "（结果按数值从小到大排列。）",
        }.get(kind, "（结果按第一列的字符编码顺序升序排列。）")
    return {
        "time": "(List the rows in chronological order, earliest first.)",
        "number": "(List the rows in ascending order of value.)",
    }.get(kind, "(List the rows in ascending order of the first column, by character code.)")


def ordered_sql(sql: str, columns: int) -> str:
    """The SQL with its output ordered by every output column, first to last.

    >>> ordered_sql("select a, b from t", 2)
    'select * from ( select a, b from t ) order by 1, 2'
    """
    keys = ", ".join(str(i + 1) for i in range(columns))
    return f"select * from ( {sql.strip().rstrip(';')} ) order by {keys}"


def value_kind(values: list[object]) -> str:
    """``time``, ``number`` or ``text`` of a column's non-null values."""
    present = [v for v in values if v is not None and v != ""]
    if present and all(isinstance(v, int | float) for v in present):
        return "number"
    if present and all(
        isinstance(v, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}(?:[ T][\d:.]+)?", v)
        for v in present
    ):
        return "time"
    return "text"


def draw(seed: int, key: str) -> float:
    """A seeded number in [0, 1) for one decision about one task."""
    digest = hashlib.sha256(f"{seed}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def with_sentences(question: str, sentences: list[str], language: str) -> str:
    """The question followed by the sentences (Chinese without spaces)."""
    if not sentences:
        return question
    sep = "" if language == "zh" else " "
    return question.rstrip() + sep + sep.join(sentences)


__all__ = [
    "SemanticsOptions",
    "draw",
    "now_sentence",
    "order_sentence",
    "ordered_sql",
    "pinned_now",
    "rank_limit",
    "tie_sentence",
    "value_kind",
    "with_sentences",
]
