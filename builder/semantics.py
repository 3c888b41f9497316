"""Task semantics a solver cannot guess, stated in the question in its own language.

- **A fixed "now".** SQL that computes relative to a pinned timestamp (EHRSQL's
  ``2105-12-31 23:59:00``, BULL's pinned ``'now'``) gets a sentence giving that timestamp.
- **Ties past N.** A rank-limited question (``dense_rank() ... <= N``) whose gold has more
  than N rows states the tie rule its SQL computes (dense or not), however many rows tie,
  as the paper keeps such questions; ``max_tie_factor`` (off by default) opts in to
  rejecting answers longer than that many times N.
- **Requested order.** With ``order_share`` > 0, a seeded share of multi-row answers whose
  SQL leaves the order open gets an ORDER BY over its output columns and a clause asking
  for that order by what it sorts (dates, values, names); an answer whose order no plain
  clause states truthfully keeps its open order.

All of it is one note after the question, one sentence of clauses (``note``): "以2105年12月
31日23:59为当前时间；并列的名次都计入……；按日期从早到晚排列。"
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
        tie_rule: state the tie rule of rank-limited answers longer than N (false: reject
            them instead).
        max_tie_factor: reject a rank-limited answer with more than this many times N rows
            (None, the default: keep every one, stating the tie rule).
        order_share: share of eligible multi-row answers given a requested order (the
            paper's release has 92 order-sensitive tasks of 410, 22%).
    """

    state_now: bool = True
    tie_rule: bool = True
    max_tie_factor: float | None = None
    order_share: float = 0.35

    def __post_init__(self) -> None:
        from dataspace.errors import ConfigError

        if not 0.0 <= self.order_share <= 1.0:
            raise ConfigError(
                f"semantics.order_share must be between 0 and 1, not {self.order_share}"
            )
        if self.max_tie_factor is not None and self.max_tie_factor < 1.0:
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


def now_clause(stamp: str, language: str) -> str:
    """The clause stating the fixed "now" (a part of the task's one note).

    >>> now_clause("2105-12-31 23:59:00", "zh")
    '以2105年12月31日23:59为当前时间'
    >>> now_clause("2105-12-31 23:59:00", "en")
    'take the current time to be 2105-12-31 23:59:00'
    """
    if language == "zh":
        m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2}))?)?", stamp)
        if m is None:
            return f"以{stamp}为当前时间"
        y, mo, d, hh, mm, ss = m.groups()
        text = f"{y}年{int(mo)}月{int(d)}日"
        if hh is not None:
            text += f"{hh}:{mm}" + (f":{ss}" if ss and ss != "00" else "")
        return f"以{text}为当前时间"
    return f"take the current time to be {stamp}"


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


def dense_ranks(sql: str) -> bool:
    """Whether the SQL's rank cut is a dense rank (ties do not skip the ranks after them).

    >>> dense_ranks("select dense_rank() over (order by x) as c1"), dense_ranks("rank() over")
    (True, False)
    """
    return bool(re.search(r"\bdense_rank\s*\(", sql, re.I))


def tie_clause(n: int, language: str, *, dense: bool = True) -> str:
    """The clause stating how ties count in a top-N answer (any number of rows may tie).

    >>> tie_clause(3, "zh")
    '并列的名次都计入（名次相同，之后的名次不跳号），所以结果可能多于3项'
    >>> tie_clause(1, "en", dense=False)[:68]
    'rows that tie share a rank and the ranks after them are skipped (1, '
    """
    if language == "zh":
        how = "之后的名次不跳号" if dense else "之后的名次跳过相应位数，如1、1、3"
        return f"并列的名次都计入（名次相同，{how}），所以结果可能多于{n}项"
    how = (
        "the next rank follows without a gap (1, 1, 2)"
        if dense
        else "the ranks after them are skipped (1, 1, 3)"
    )
    many = "one" if n == 1 else str(n)
    return (
        f"rows that tie share a rank and {how}, so every row ranked 1 to {n} is listed "
        f"and there may be more than {many}"
    )


def order_clause(values: list[object], language: str) -> str | None:
    """The clause asking for the rows in order of their first column, by what it sorts.

    None when no plain phrasing is truthful: the first column repeats a value (the order
    would then depend on columns the clause does not name) or holds text whose code-point
    order is not the alphabetical order a reader would apply (Chinese, mixed case).

    >>> order_clause(["2101-01-02", "2100-03-04"], "zh")
    '按日期从早到晚排列'
    >>> order_clause([3, 1.5], "en")
    'list the rows by value, smallest first'
    >>> order_clause(["aspirin", "heparin"], "zh")
    '按名称的字母顺序排列'
    >>> order_clause(["阿司匹林", "肝素"], "zh") is None
    True
    """
    present = [v for v in values if v is not None and v != ""]
    if len(present) != len(values) or len(set(map(repr, present))) != len(present):
        return None
    kind = value_kind(present)
    zh = language == "zh"
    if kind == "time":
        dated = all(len(str(v)) == 10 for v in present)
        if zh:
            return "按日期从早到晚排列" if dated else "按时间从早到晚排列"
        return f"list the rows by {'date' if dated else 'time'}, earliest first"
    if kind == "number":
        return "按数值从小到大排列" if zh else "list the rows by value, smallest first"
    texts = [str(v) for v in present]
    plain = all(t.isascii() for t in texts) and sorted(texts) == sorted(
        texts, key=lambda t: (t.casefold(), t)
    )
    if not plain:
        return None
    return "按名称的字母顺序排列" if zh else "list the rows alphabetically by name"


def note(clauses: list[str] | tuple[str, ...], language: str) -> str:
    """The task's one note: its clauses as one sentence.

    >>> note(["以2105年12月31日23:59为当前时间", "按日期从早到晚排列"], "zh")
    '以2105年12月31日23:59为当前时间；按日期从早到晚排列。'
    >>> note(["take the current time to be 2105-12-31 23:59:00"], "en")
    'Take the current time to be 2105-12-31 23:59:00.'
    """
    if not clauses:
        return ""
    if language == "zh":
        return "；".join(clauses) + "。"
    text = "; ".join(clauses)
    return text[0].upper() + text[1:] + "."


def states(question: str, clause: str) -> bool:
    """Whether the question's note holds a clause (a note capitalizes its first clause).

    >>> states("How many? Take the current time to be x.", "take the current time to be x")
    True
    """
    return clause.casefold() in question.casefold()


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


def with_note(question: str, clauses: list[str] | tuple[str, ...], language: str) -> str:
    """The question followed by its one note (Chinese without a space).

    >>> with_note("有多少患者？", ["以2105年12月31日23:59为当前时间"], "zh")
    '有多少患者？以2105年12月31日23:59为当前时间。'
    >>> with_note("各季度的增速是多少", ["按日期从早到晚排列"], "zh")
    '各季度的增速是多少？按日期从早到晚排列。'
    """
    text = note(clauses, language)
    if not text:
        return question
    question = question.rstrip()
    if question and question[-1] not in "？?。.！!":
        # A question the source wrote without a final mark gets one, so that its note is a
        # sentence of its own ("…是多少？以…为当前时间。").
        if language == "zh":
            asks = re.search(r"多少|什么|哪|谁|几|吗|是否|何|如何|怎样", question)
        else:
            asks = re.match(
                r"\s*(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|"
                r"did|can|has|have)\b",
                question,
                re.I,
            )
        question += ("？" if asks else "。") if language == "zh" else ("?" if asks else ".")
    return question + ("" if language == "zh" else " ") + text


def without_note(question: str, clauses: list[str] | tuple[str, ...], language: str) -> str:
    """The question with its note taken off again (as it was before ``with_note``).

    >>> without_note("How many? Take the current time to be x.", ["take the current time "
    ...     "to be x"], "en")
    'How many?'
    """
    text = note(clauses, language)
    if text and question.endswith(text):
        return question[: len(question) - len(text)].rstrip()
    return question


__all__ = [
    "SemanticsOptions",
    "dense_ranks",
    "draw",
    "note",
    "now_clause",
    "order_clause",
    "ordered_sql",
    "pinned_now",
    "rank_limit",
    "states",
    "tie_clause",
    "value_kind",
    "with_note",
    "without_note",
]
