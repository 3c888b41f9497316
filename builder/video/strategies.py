"""The two video strategies: predicate abstraction and answer evidence.

- ``predicate_abstraction``: one or two stable predicate atoms stated in the question move
  into the video (an entity card, a configuration panel with field, direction and cutoff, or
  a time window); the question's aligned span becomes a slot that points at the video, and
  the records stay in the workspace. Boundary records (real rows either side of a cutoff)
  and out-of-scope entities (real values of the same field) are the distractors.
- ``answer_evidence``: for a compact answer, the rows of one source table that produce it
  are shown across scenes and that table is withheld from the workspace. Replacing the table
  by exactly the shown rows must reproduce the gold by execution; every distractor (a real
  nearby row) is kept only if adding it still reproduces the gold, so no distractor can
  create a second valid answer.

Both reject (``StrategyRejected``, one line) when the task does not fit.
"""

from __future__ import annotations

import logging
import random
import re
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from builder.documents.plan import known_label
from builder.errors import Rejected
from builder.tables import quote_ident
from builder.video.atoms import AnswerAtom, AtomSet, PredicateAtom, display, question_span

_Comparable = TypeVar("_Comparable", float, str)


logger = logging.getLogger(__name__)

STRATEGIES = ("predicate_abstraction", "answer_evidence")

_BEFORE_EN = (
    "no less than",
    "no more than",
    "at least",
    "at most",
    "more than",
    "greater than",
    "less than",
    "fewer than",
    "higher than",
    "lower than",
    "over",
    "above",
    "below",
    "under",
    "exceeding",
    "after",
    "before",
    "since",
)
_AFTER_EN = (
    "or older",
    "or younger",
    "or more",
    "or less",
    "or above",
    "or below",
    "or higher",
    "or lower",
    "or later",
    "or earlier",
    "and above",
    "and over",
    "and below",
    "%",
)
_BEFORE_ZH = (
    "不少于",
    "不低于",
    "不超过",
    "不高于",
    "超过",
    "高于",
    "低于",
    "大于",
    "小于",
    "至少",
    "多于",
    "少于",
)
_AFTER_ZH = ("及以上", "及以下", "以上", "以下", "之后", "之前")
# The measure words a Chinese number carries ("60岁", "3天", "2%").
_UNITS_ZH = (
    "个月",
    "小时",
    "分钟",
    "毫克",
    "毫升",
    "%",
    "岁",
    "天",
    "年",
    "月",
    "周",
    "次",
    "例",
    "人",
    "元",
)
_AFTER_ZH_RE = re.compile(
    "(?:" + "|".join(map(re.escape, _UNITS_ZH)) + ")?(" + "|".join(_AFTER_ZH) + ")?"
)


class StrategyRejected(Rejected, ValueError):
    """A task does not fit a video strategy; carries a one-line reason."""

    stage_name = "video"


@dataclass(frozen=True, kw_only=True)
class SupportRecord:
    """A real row shown in the video (answer-bearing, distractor or boundary example)."""

    record_id: str
    table: str
    rowid: int
    columns: tuple[str, ...]
    values: tuple[Any, ...]
    role: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "record_id": self.record_id,
            "table": self.table,
            "rowid": self.rowid,
            "columns": list(self.columns),
            "values": [display(v) for v in self.values],
            "role": self.role,
        }


@dataclass(frozen=True, kw_only=True)
class EvidencePlan:
    """What a video must carry and how the task changes.

    Attributes:
        strategy: one of ``STRATEGIES``.
        table: the main source table of the evidence.
        predicates: the predicate atoms moved into the video.
        answers: the answer atoms shown in the video.
        records: supporting records (answer rows, distractors, boundary examples).
        question: the rewritten question.
        note: a clause for the question's one note (answer evidence: where the withheld
            table's records are), or empty.
        withheld: tables removed from the workspace.
        cells: answer atom id -> (record id, column) where it is shown.
        language: ``en`` or ``zh``.
    """

    strategy: str
    table: str
    predicates: tuple[PredicateAtom, ...]
    answers: tuple[AnswerAtom, ...]
    records: tuple[SupportRecord, ...]
    question: str
    note: str = ""
    withheld: tuple[str, ...] = ()
    cells: dict[str, tuple[str, str]] = field(default_factory=dict)
    language: str = "en"

    @property
    def atoms(self) -> tuple[PredicateAtom | AnswerAtom, ...]:
        """Every evidence atom, predicates first."""
        return (*self.predicates, *self.answers)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (for the ledger)."""
        return {
            "strategy": self.strategy,
            "table": self.table,
            "atoms": [a.to_json() for a in self.atoms],
            "records": [r.to_json() for r in self.records],
            "question": self.question,
            "note": self.note,
            "withheld": list(self.withheld),
            "cells": {k: list(v) for k, v in self.cells.items()},
        }


def _expand(question: str, span: tuple[int, int], zh: bool, operator: str) -> tuple[int, int]:
    """Widen a literal's span over adjacent direction words and units, or a year's ``年``.

    A Chinese comparison takes its unit and direction along ("在60岁及以上", "超过3天"), so
    no part of it is left dangling once the span is said as what the video shows.

    >>> q = "年龄在60岁及以上的患者有多少人？"
    >>> a, b = _expand(q, (3, 5), True, ">=")
    >>> q[a:b]
    '在60岁及以上'
    """
    a, b = span
    if operator == "=":
        return span
    if operator == "year":
        if zh and question[b : b + 1] == "年":
            b += 1
        return a, b
    if zh:
        m = _AFTER_ZH_RE.match(question, b)
        b = m.end() if m else b
        direction = bool(m and m.group(1))
        for word in sorted(_BEFORE_ZH, key=len, reverse=True):
            if question[:a].endswith(word):
                return a - len(word), b
        if direction and question[:a].endswith(("在", "为")):
            a -= 1  # "年龄在60岁及以上": the 在 belongs to the condition
        return a, b
    low = question.lower()
    for word in sorted(_AFTER_EN, key=len, reverse=True):
        rest = low[b:].lstrip(" ")
        if rest.startswith(word):
            b = b + (len(low[b:]) - len(rest)) + len(word)
            break
    for word in sorted(_BEFORE_EN, key=len, reverse=True):
        head = low[:a].rstrip(" ")
        if head.endswith(word) and (len(head) == len(word) or not head[-len(word) - 1].isalnum()):
            a = len(head) - len(word)
            break
    return a, b


_QUOTES = {"“": "”", '"': '"', "'": "'", "「": "」", "‘": "’"}
# Characters that end a Chinese noun phrase when read backwards from a literal ("在病房52").
_ZH_BREAK = set("在于的为是和与从到过了被把对给向往将及或、，。？；：（）“”")


def _label(atom: PredicateAtom, language: str) -> str:
    """The column's prose label, or "" when it has none in the question's language."""
    label = known_label(atom.column, language) or ""
    if language == "en" and re.search(r"[\u3400-\u9fff]", label):
        return ""  # a Chinese column name has no place in an English question
    return re.sub(r"\s*[（(][^（）()]*[）)]", "", label)  # "CPI同比(%)" reads "CPI同比"


def slot_text(atom: PredicateAtom, language: str) -> str:
    """The words that stand for an atom's value when nothing around it names it.

    A phrase of the question's language, never a bracketed slot or a schema name.

    >>> a = PredicateAtom(atom_id="P1", table="t", column="valuenum", operator=">=",
    ...                   value=60, literal="60", span=(0, 2), display="60")
    >>> slot_text(a, "en"), slot_text(a, "zh")
    ('the numeric result range shown in the video', '视频中给出的数值结果范围')
    """
    label = _label(atom, language)
    if language == "zh":
        if atom.operator == "year":
            return "视频中所示的那一年"
        if atom.operator == "=":
            return f"视频中展示的{label or '那一项'}"
        return f"视频中给出的{label}范围" if label else "视频中给出的范围"
    if atom.operator == "year":
        return "the year shown in the video"
    if atom.operator == "=":
        return f"the {label or 'value'} shown in the video"
    return f"the {label} range shown in the video" if label else "the range shown in the video"


def fill_slot(question: str, span: tuple[int, int], atom: PredicateAtom, language: str) -> str:
    """The question with an atom's value at ``span`` said as what the video shows.

    The phrase fits its place: a quoted value before a noun becomes an attributive ("做过
    视频中展示的化验"), a value after its noun takes the noun along ("在视频里出现的病房
    住过"), a condition becomes "符合视频中给出的条件"; never a bracketed slot.

    Raises:
        StrategyRejected: a Chinese value that is a word of the sentence, not a quoted name.

    >>> a = PredicateAtom(atom_id="P1", table="wards", column="WARDID", operator="=",
    ...                   value=52, literal="52", span=(3, 5), display="52")
    >>> fill_slot("在病房52住过的患者有多少人？", (3, 5), a, "zh")
    '在视频里出现的病房住过的患者有多少人？'
    >>> b = PredicateAtom(atom_id="P2", table="d_labitems", column="LABEL", operator="=",
    ...                   value="ph", literal="ph", span=(3, 5), display="ph")
    >>> fill_slot("做过“ph”化验的患者有多少人？", (3, 5), b, "zh")
    '做过视频中展示的化验的患者有多少人？'
    >>> fill_slot("how many patients had a 'ph' lab test?", (25, 27), b, "en")
    'how many patients had a lab test shown in the video?'
    """
    a, b = span
    zh = language == "zh"
    quoted = a > 0 and b < len(question) and question[a - 1] in _QUOTES
    if atom.operator == "=" and quoted and question[b] == _QUOTES[question[a - 1]]:
        a, b = a - 1, b + 1
    before, after = question[:a], question[b:]
    if zh and _inside_word(question, a, b):
        raise StrategyRejected(f"{atom.display!r} is part of a longer word or number")
    if atom.operator == "year":
        if zh and before.endswith("在") and after.startswith(("在", "于")):
            before = before[:-1]  # "在2102年在病房12住过": one 在 phrase at a time
        return before + slot_text(atom, language) + after
    if zh:
        return _fill_zh(before, after, atom, quoted=question[a : a + 1] in _QUOTES)
    return _fill_en(before, after, atom)


# Verbs whose object a quoted value is ("做过“ph”化验", "被开具过“aspirin”的患者").
_ZH_VERBS = (
    "做过",
    "做",
    "接受过",
    "接受",
    "开具过",
    "开具",
    "诊断为",
    "服用过",
    "服用",
    "使用过",
    "使用",
    "含有",
    "有",
    "包括",
    "涉及",
    "进行过",
    "进行",
    "住进",
    "入住",
    "转入",
)
# What a verb's object is called when the column has no label.
_ZH_OBJECT = {"诊断为": "诊断"}
# Words that end a time or function phrase, never an entity noun ("1年前", "本次住院期间").
_ZH_NOT_NOUN = re.compile(r"[前后以期否次]|本次|第一|最后|目前|至今|今年|去年")
_CJK = re.compile(r"[\u3400-\u9fff]")


def _inside_word(question: str, a: int, b: int) -> bool:
    """Whether ``question[a:b]`` is part of a longer number or (Latin) word."""
    word = re.compile(r"[0-9A-Za-z_]")
    left, right = question[a - 1 : a] if a else "", question[b : b + 1]
    return bool(
        (left and re.match(r"[0-9A-Za-z_.]", left) and word.match(question[a]))
        or (right and word.match(right) and word.match(question[b - 1]))
    )


def _fill_zh(before: str, after: str, atom: PredicateAtom, *, quoted: bool) -> str:
    """The Chinese rewrite of ``before + value + after`` (see ``fill_slot``)."""
    if atom.operator != "=":
        if re.match(r"\s*(?:至|到|~|-|－|—|和|或)\s*\d", after):
            raise StrategyRejected(f"the condition on {atom.display!r} is one end of a range")
        if after[:1] and not re.match(r"[的、，。？；）)且并或时而]", after[0]):
            raise StrategyRejected(
                f"the condition on {atom.display!r} runs on into the words after it"
            )
        label = _label(atom, "zh")
        before = before[:-1] if before.endswith(("在", "为")) else before
        if label and before.endswith(label):
            return before + "符合视频中给出的条件" + after
        return before + (label or "") + "符合视频中给出的条件" + after
    if _CJK.search(atom.literal) and not quoted:
        # A value said as a word of the sentence ("于医院死亡") has no place a phrase about
        # the video could take without changing what the sentence says.
        raise StrategyRejected(
            f"the value {atom.display!r} is a word of the question, not a quoted name"
        )
    noun_follows = bool(after[:1] and _CJK.match(after[0]) and after[0] not in _ZH_BREAK)
    if before.endswith(("名为", "称为", "叫做")) and after.startswith("的"):
        # "名为“ziprasidone”的药物" -> "视频中展示的药物"
        return before[:-2] + "视频中展示的" + after[1:]
    run = ""
    for ch in reversed(before):
        if ch in _ZH_BREAK or not _CJK.match(ch):
            break
        run = ch + run
    head = before[: len(before) - len(run)]
    verb = next((v for v in _ZH_VERBS if before.endswith(v)), "")
    if verb or not run:
        if noun_follows and quoted:
            return before + "视频中展示的" + after  # "做过“ph”化验" -> "做过视频中展示的化验"
        if noun_follows:
            raise StrategyRejected(f"{atom.display!r} runs on into the word after it")
        noun = _label(atom, "zh") or _ZH_OBJECT.get(verb, "")
        return before + (f"视频中展示的{noun}" if noun else slot_text(atom, "zh")) + after
    if len(run) > 4 or _ZH_NOT_NOUN.search(run) or head[-1:].isdigit():
        raise StrategyRejected(f"no noun names {atom.display!r} in this question")
    return head + "视频里出现的" + run + after  # "在病房52住过" -> "在视频里出现的病房住过"


_EN_FUNCTION = frozenset(
    [
        "in",
        "on",
        "at",
        "of",
        "to",
        "from",
        "by",
        "with",
        "for",
        "the",
        "a",
        "an",
        "is",
        "was",
        "are",
        "were",
        "has",
        "have",
        "had",
        "did",
        "does",
        "do",
        "and",
        "or",
        "than",
        "between",
        "during",
        "since",
        "after",
        "before",
        "into",
        "per",
        "as",
    ]
)


def _fill_en(before: str, after: str, atom: PredicateAtom) -> str:
    """The English rewrite of ``before + value + after`` (see ``fill_slot``)."""
    words = re.findall(r"[A-Za-z]+", before[-40:])
    prev = words[-1] if words else ""
    label = _label(atom, "en")
    if atom.operator == "=":
        m = re.match(
            r"\s*((?:[a-z]+\s){0,2}?[a-z]+?)(?=\s*(?:[?.,;]|$|\s(?:for|of|in|on|at|"
            r"with|and|or|that|which|who|to|during|since|after|before)\b))",
            after,
            re.I,
        )
        if m and prev.lower() in ("a", "an", "the"):
            noun = m.group(1)  # "had a 'ph' lab test" -> "had a lab test shown in the video"
            return before.rstrip() + " " + noun + " shown in the video" + after[m.end() :]
        if prev and prev.lower() not in _EN_FUNCTION and before.rstrip().endswith(prev):
            # "of patient 30037" -> "of the patient shown in the video"
            head = before.rstrip()[: -len(prev)]
            return f"{head}the {prev} shown in the video{after}"
        if label:
            return f"{before}the {label} shown in the video{after}"
        raise StrategyRejected(
            f"no words name what the video shows for {atom.display!r} in this question"
        )
    # A condition: "aged 60 or older" -> "aged within the range shown in the video".
    if re.match(r"\s*(?:to|and|-)\b|\s*[A-Za-z]", after) and not re.match(
        r"\s*(?:for|of|in|on|at|with|during|since|who|which|that|among)\b", after
    ):
        raise StrategyRejected(
            f"the condition on {atom.display!r} runs on into the rest of the sentence"
        )
    if prev.lower() in ("of", "at", "by", "is", "was"):
        before = before.rstrip()[: -len(prev)].rstrip() + " "
    return before + "within the range shown in the video" + after


def leaks(question: str, atom: PredicateAtom | AnswerAtom) -> bool:
    """Whether the question still states an atom's value.

    >>> a = AnswerAtom(atom_id="A1", row=0, field="x", value=151.0, display="151.0")
    >>> leaks("is it 151.0?", a), leaks("is it 1510?", a)
    (True, False)
    """
    literal = atom.literal if isinstance(atom, PredicateAtom) else atom.display
    return question_span(question + " ", literal, atom.value) is not None or bool(
        len(literal) >= 2
        and re.search(
            r"(?<![0-9A-Za-z_.])" + re.escape(literal.lower()) + r"(?![0-9A-Za-z_]|\.\d)",
            question.lower(),
        )
    )


def _order_rank(atom: PredicateAtom) -> int:
    return {"year": 0, ">": 1, ">=": 1, "<": 1, "<=": 1, "=": 2, "!=": 3}[atom.operator]


def _id_column(conn: sqlite3.Connection, table: str, exclude: str) -> str | None:
    info = conn.execute(f"pragma table_info({quote_ident(table)})").fetchall()
    for r in sorted(info, key=lambda r: (not r[5], r[0])):
        name = r[1]
        if name != exclude and (r[5] or re.search(r"(id|code)$", name, re.I)):
            return name
    return None


def _satisfies(value: Any, atom: PredicateAtom) -> bool:
    if value is None:
        return False
    if atom.operator == "year":
        return str(value)[:4] == str(atom.value)
    # Comparing two floats or two strings cannot raise, so the try only guards the casts.
    try:
        if isinstance(atom.value, int | float):
            return _compare(float(value), float(atom.value), atom.operator)
        return _compare(str(value), str(atom.value), atom.operator)
    except (TypeError, ValueError):
        return False


def _compare(a: _Comparable, b: _Comparable, operator: str) -> bool:
    """``a <operator> b`` for one of ``=``, ``!=``, ``>``, ``>=``, ``<``, ``<=``."""
    return {"=": a == b, "!=": a != b, ">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[operator]


def _boundary(
    conn: sqlite3.Connection, atom: PredicateAtom, rng: random.Random, start: int
) -> list[SupportRecord]:
    """Real rows either side of an atom's condition (or other values of its field)."""
    t, c = quote_ident(atom.table), quote_ident(atom.column)
    idc = _id_column(conn, atom.table, atom.column)
    cols = [x for x in (idc, atom.column) if x]
    sel = ", ".join(quote_ident(x) for x in cols)
    if atom.operator == "=":
        rows = conn.execute(
            f"select rowid, {sel} from {t} where {c} is not null and {c} != ? "
            f"group by {c} order by rowid limit 40",
            (atom.value,),
        ).fetchall()
        rng.shuffle(rows)
        picked = rows[:3]
    elif atom.operator == "year":
        year = f"substr({c}, 1, 4)"
        inside = conn.execute(
            f"select rowid, {sel} from {t} where {year} = ? order by rowid limit 2",
            (str(atom.value),),
        ).fetchall()
        outside = conn.execute(
            f"select rowid, {sel} from {t} where {c} is not null and "
            f"{year} != ? order by abs(cast({year} as integer) - ?), rowid "
            "limit 2",
            (str(atom.value), int(atom.value)),
        ).fetchall()
        picked = inside + outside
    else:
        rows = conn.execute(
            f"select rowid, {sel} from {t} where typeof({c}) in "
            f"('integer', 'real') order by abs({c} - ?), rowid limit 40",
            (atom.value,),
        ).fetchall()
        passing = [r for r in rows if _satisfies(r[-1], atom)][:2]
        failing = [r for r in rows if not _satisfies(r[-1], atom)][:2]
        picked = passing + failing
    out = []
    for n, r in enumerate(picked):
        role = "pass" if _satisfies(r[-1], atom) else "fail"
        out.append(
            SupportRecord(
                record_id=f"R{start + n}",
                table=atom.table,
                rowid=int(r[0]),
                columns=tuple(cols),
                values=tuple(r[1:]),
                role=role,
            )
        )
    return out


def predicate_abstraction(
    atoms: AtomSet,
    *,
    question: str,
    conn: sqlite3.Connection,
    language: str,
    seed: int,
    max_atoms: int = 2,
    question_language: str | None = None,
) -> EvidencePlan:
    """Move up to ``max_atoms`` stated conditions into the video.

    Raises:
        StrategyRejected: no predicate is stated once in the question, or rewriting the
            question would still leak a moved value.
    """
    candidates = sorted(
        (p for p in atoms.predicates if p.span and p.operator != "!="),
        key=lambda p: (_order_rank(p), p.atom_id),
    )
    if not candidates:
        raise StrategyRejected("no stable condition is stated in the question")
    chosen: list[PredicateAtom] = []
    spans: list[tuple[int, int]] = []
    q_lang = question_language or language
    zh = q_lang == "zh"
    for atom in candidates:
        assert atom.span is not None
        span = _expand(question, atom.span, zh, atom.operator)
        if any(not (span[1] <= a or b <= span[0]) for a, b in spans):
            continue
        chosen.append(atom)
        spans.append(span)
        if len(chosen) >= max_atoms:
            break
    rewritten = question
    for atom, span in sorted(zip(chosen, spans, strict=True), key=lambda x: -x[1][0]):
        rewritten = fill_slot(rewritten, span, atom, q_lang)
    for atom in chosen:
        if leaks(rewritten, atom):
            raise StrategyRejected(f"the rewritten question still states {atom.display!r}")
    rng = random.Random(f"pa:{seed}")
    records: list[SupportRecord] = []
    for atom in chosen:
        records += _boundary(conn, atom, rng, len(records) + 1)
    return EvidencePlan(
        strategy="predicate_abstraction",
        table=chosen[0].table,
        predicates=tuple(chosen),
        answers=(),
        records=tuple(records),
        question=rewritten,
        language=language,
    )


def _rows_equal(a: Sequence[Sequence[Any]], b: Sequence[Sequence[Any]], ordered: bool) -> bool:
    key = [tuple((type(v).__name__, v) for v in r) for r in a]
    other = [tuple((type(v).__name__, v) for v in r) for r in b]
    return key == other if ordered else Counter(key) == Counter(other)


def run_restricted(
    conn: sqlite3.Connection, sql: str, table: str, rowids: Sequence[int]
) -> list[tuple[Any, ...]]:
    """Execute ``sql`` on a copy of the database whose ``table`` holds only ``rowids``."""
    copy = sqlite3.connect(":memory:")
    try:
        conn.backup(copy)
        marks = ", ".join("?" for _ in rowids) or "null"
        copy.execute(f"delete from {quote_ident(table)} where rowid not in ({marks})", list(rowids))
        return copy.execute(sql).fetchall()
    finally:
        copy.close()


def _referenced_columns(sql: str, table: str, schema: dict[str, tuple[str, ...]]) -> list[str]:
    import sqlglot
    from sqlglot import exp

    from builder.video.atoms import _resolve

    cols = []
    for column in sqlglot.parse_one(sql, read="sqlite").find_all(exp.Column):
        if _resolve(column, schema) == table:
            for c in schema[table]:
                if c.lower() == column.name.lower() and c not in cols:
                    cols.append(c)
    return cols


def answer_evidence(
    atoms: AtomSet,
    *,
    sql: str,
    question: str,
    conn: sqlite3.Connection,
    header: Sequence[str],
    rows: Sequence[Sequence[Any]],
    ordered: bool,
    schema: dict[str, tuple[str, ...]],
    language: str,
    seed: int,
    max_rows: int = 6,
    max_cells: int = 8,
    max_columns: int = 6,
    distractors: int = 3,
    question_language: str | None = None,
) -> EvidencePlan:
    """Show the answer-bearing rows of one source table and withhold that table.

    Raises:
        StrategyRejected: the answer is not compact, no table's rows reproduce it within the
            limits, or the question states an answer value.
    """
    from builder.sqlinfo import tables_read

    if len(rows) > 4 or len(rows) * len(header) > max_cells:
        raise StrategyRejected(f"the answer ({len(rows)}x{len(header)}) is not compact enough")
    for atom in atoms.answers:
        if atom.value is None:
            raise StrategyRejected("the answer holds NULL, which a video cannot show")
        if leaks(question, atom):
            raise StrategyRejected(f"the question states the answer value {atom.display!r}")
    lower = {k.lower(): k for k in schema}
    rng = random.Random(f"ae:{seed}")
    reasons = []
    for name in tables_read(sql):
        table = lower.get(name.lower())
        if table is None:
            continue
        shown = _referenced_columns(sql, table, schema)
        conds, params = [], []
        for p in atoms.predicates:
            if p.table != table:
                continue
            c = quote_ident(p.column)
            if p.operator == "year":
                conds.append(f"substr({c}, 1, 4) = ?")
                params.append(str(p.value))
            else:
                conds.append(f"{c} {p.operator} ?")
                params.append(p.value)
        where = " and ".join(conds) or "1"
        cand = conn.execute(
            f"select rowid, * from {quote_ident(table)} where {where} limit 500", params
        ).fetchall()
        values = {(type(a.value).__name__, a.value) for a in atoms.answers}
        cols = schema[table]
        hits = [r for r in cand if any((type(v).__name__, v) in values for v in r[1:])]
        if not hits or len(hits) > max_rows:
            reasons.append(f"{table}: {len(hits)} answer-bearing rows")
            continue
        ids = [int(r[0]) for r in hits]
        if not _rows_equal(run_restricted(conn, sql, table, ids), rows, ordered):
            reasons.append(f"{table}: its shown rows do not reproduce the answer")
            continue
        cells: dict[str, tuple[str, str]] = {}
        for atom in atoms.answers:
            for n, r in enumerate(hits):
                for c, v in zip(cols, r[1:], strict=True):
                    if (type(v).__name__, v) == (type(atom.value).__name__, atom.value):
                        cells.setdefault(atom.atom_id, (f"R{n + 1}", c))
                        if c not in shown:
                            shown.append(c)
        if len(cells) != len(atoms.answers):
            reasons.append(f"{table}: not every answer value is a cell of its rows")
            continue
        if len(shown) > max_columns:
            reasons.append(f"{table}: {len(shown)} columns are too many to show")
            continue
        # Distractors: real rows that share a shown value with an answer row, kept only when
        # the gold survives them.
        pool = conn.execute(
            f"select rowid from {quote_ident(table)} where rowid not in "
            f"({', '.join('?' for _ in ids)}) order by rowid limit 400",
            ids,
        ).fetchall()
        near = []
        idx = [cols.index(c) for c in shown]
        answer_vals = {(i, r[1 + i]) for r in hits for i in idx}
        for (rid,) in pool:
            row = conn.execute(
                f"select * from {quote_ident(table)} where rowid = ?", (rid,)
            ).fetchone()
            if any((i, row[i]) in answer_vals for i in idx):
                near.append((int(rid), row))
        rng.shuffle(near)
        if len(near) < distractors:  # no close neighbours: any real rows will do
            others = [
                (
                    int(rid),
                    conn.execute(
                        f"select * from {quote_ident(table)} where rowid = ?", (rid,)
                    ).fetchone(),
                )
                for (rid,) in rng.sample(pool, min(len(pool), 6))
            ]
            near += [o for o in others if o[0] not in {n[0] for n in near}]
        kept: list[tuple[int, tuple[Any, ...]]] = []
        for rid, row in near[:12]:
            trial = ids + [k[0] for k in kept] + [rid]
            if _rows_equal(run_restricted(conn, sql, table, trial), rows, ordered):
                kept.append((rid, row))
            if len(kept) >= distractors:
                break
        records = [
            SupportRecord(
                record_id=f"R{n + 1}",
                table=table,
                rowid=int(r[0]),
                columns=tuple(shown),
                values=tuple(r[1 + cols.index(c)] for c in shown),
                role="answer",
            )
            for n, r in enumerate(hits)
        ]
        records += [
            SupportRecord(
                record_id=f"R{len(hits) + n + 1}",
                table=table,
                rowid=rid,
                columns=tuple(shown),
                values=tuple(row[cols.index(c)] for c in shown),
                role="distractor",
            )
            for n, (rid, row) in enumerate(kept)
        ]
        q_zh = (question_language or language) == "zh"
        # The table is named only when its name is in the question's language.
        named = bool(re.search(r"[\u3400-\u9fff]", table)) == q_zh
        if q_zh:
            shown_as = table if table.endswith("记录") else f"{table}记录"  # no "记录记录"
            note = (
                f"所需的{shown_as}在视频里，工作区中没有这张表"
                if named
                else "所需的记录在视频里，工作区中没有这张表"
            )
        else:
            note = (
                f"the {table} records this needs are shown in the video, and that table is "
                "not in the workspace"
                if named
                else "the records this needs are shown in the video, and their table is not "
                "in the workspace"
            )
        return EvidencePlan(
            strategy="answer_evidence",
            table=table,
            predicates=(),
            answers=atoms.answers,
            records=tuple(records),
            question=question,
            note=note,
            withheld=(table,),
            cells=cells,
            language=language,
        )
    raise StrategyRejected(
        "no source table carries the answer compactly ("
        + "; ".join(reasons or ["no table read"])
        + ")"
    )


__all__ = [
    "STRATEGIES",
    "EvidencePlan",
    "StrategyRejected",
    "SupportRecord",
    "answer_evidence",
    "fill_slot",
    "leaks",
    "predicate_abstraction",
    "run_restricted",
    "slot_text",
]
