"""Question translation with a focused glossary, and its deterministic validator.

The focused glossary holds only the entities of one sample: each value literal of the SQL
(as the source question would name it, and as the translated question must name it: the
translated database's own string when question and database share a language) and the
schema names the SQL touches. The validator checks that the reply is a question in the
target language that keeps every number, date and threshold of the source and names every
glossary entity the source named.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from builder.transform.units import has_cjk
from builder.translate.glossary import norm

logger = logging.getLogger(__name__)

_DIGITS = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True, kw_only=True)
class GlossaryEntry:
    """One focused-glossary entry: how the source names it, how the target must."""

    id: str
    kind: str
    source: str
    target: str

    def to_json(self) -> dict[str, str]:
        """JSON-ready record (the request payload shape)."""
        return {"id": self.id, "kind": self.kind, "source": self.source, "target": self.target}


def numbers(text: str) -> list[str]:
    """The numbers of a text, normalized (thousands separators and leading zeros dropped).

    >>> numbers("top 3 funds above 1,250.50 on 2022-06-30")
    ['3', '1250.5', '2022', '6', '30']
    """
    out = []
    for n in _DIGITS.findall(re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)):
        if "." in n:
            n = n.rstrip("0").rstrip(".")
        out.append(str(int(n)) if n.isdigit() else n)
    return out


def mentions(text: str, term: str, language: str) -> bool:
    """Whether ``text`` names ``term`` (whole words for English, substring for Chinese).

    >>> mentions("What does potassium chloride cost?", "potassium", "en")
    True
    >>> mentions("the potassiumx test", "potassium", "en")
    False
    """
    t, x = norm(text, language), norm(term, language)
    if not x:
        return False
    if has_cjk(x) or language == "zh":
        return x in t
    return re.search(rf"(?<![a-z0-9]){re.escape(x)}(?![a-z0-9])", t) is not None


def question_problems(
    source_question: str,
    reply: Mapping[str, Any],
    *,
    focused: Sequence[GlossaryEntry],
    source_language: str,
    target_language: str,
) -> list[str]:
    """Errors of a question-translation reply (empty when it is acceptable).

    >>> e = GlossaryEntry(id="v0", kind="value", source="furosemide", target="呋塞米")
    >>> question_problems("How is furosemide given to patient 30037?",
    ...                   {"question": "患者30037如何使用呋塞米？"}, focused=[e],
    ...                   source_language="en", target_language="zh")
    []
    >>> question_problems("How is furosemide given to patient 30037?",
    ...                   {"question": "患者如何用药？"}, focused=[e],
    ...                   source_language="en", target_language="zh")
    ["number '30037' of the source question is missing", "'furosemide' must be named as '呋塞米'"]
    """
    q = reply.get("question")
    if not isinstance(q, str) or not q.strip():
        return ["reply must have a non-empty 'question' string"]
    errors: list[str] = []
    ids = reply.get("used_mapping_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        errors.append("'used_mapping_ids' must be a list of strings")
    got = set(numbers(q))
    for n in dict.fromkeys(numbers(source_question)):
        if n not in got:
            errors.append(f"number {n!r} of the source question is missing")
    for e in focused:
        if e.kind != "value" or not e.target:
            continue
        if mentions(source_question, e.source, source_language) and not mentions(
            q, e.target, target_language
        ):
            errors.append(f"{e.source!r} must be named as {e.target!r}")
    if target_language == "zh" and not has_cjk(q):
        errors.append("the question is not in Chinese")
    if target_language == "en" and not re.search(r"[A-Za-z]{2,}", q):
        errors.append("the question is not in English")
    return errors


def untranslated_share(
    question: str, target_language: str, focused: Sequence[GlossaryEntry]
) -> float:
    """Share of words left in the other language (entity names of the glossary excepted)."""
    text = question
    for e in focused:
        text = text.replace(e.target, " ")
    text = re.sub(r"'[^']*'|\"[^\"]*\"", " ", text)
    cjk = len(re.findall(r"[\u3400-\u9fff]", text))
    latin = len(re.findall(r"[A-Za-z]+", text))
    total = cjk + latin
    if not total:
        return 0.0
    return (latin if target_language == "zh" else cjk) / total


_PLACEHOLDER = re.compile(r"\x00|\{\w+\}|\[\w+\]")
_ACRONYM = re.compile(r"(?<![A-Za-z])[A-Z]{2,5}(?![A-Za-z])")
_IDENTIFIER = re.compile(r"[A-Za-z_]*\d[A-Za-z0-9_.\-/]*|[A-Za-z0-9]+_[A-Za-z0-9_]+")


def protected_terms(focused: Sequence[GlossaryEntry], sql: str) -> list[str]:
    """Words a question may keep in another language: entity names and SQL literals.

    >>> protected_terms([], "select t.a from t where t.b = 'x'")
    ['x', 't', 'a', 't', 'b', 't']
    """
    terms = [e.target for e in focused] + [e.source for e in focused]
    terms += [t.split(".")[-1] for t in terms if "." in t]
    terms += re.findall(r"'((?:[^']|'')*)'", sql)
    # Schema identifiers the SQL names: qualified columns and the tables it reads.
    for table, column in re.findall(r"\b(\w+)\.(\w+)\b", sql):
        terms += [table, column]
    terms += re.findall(r"\b(?:from|join)\s+\"?(\w+)", sql, flags=re.I)
    return [t for t in terms if t]


def fluency_problems(question: str, language: str, protected: Sequence[str]) -> list[str]:
    """Why a question does not read as ``language`` (empty when it does).

    A Chinese question may keep English only inside protected terms (database values,
    entity and schema names) and identifiers (codes with digits, snake_case names), and
    must be in Chinese word order (``word_order_problems``); an English question may keep
    Chinese only inside protected terms. An internal placeholder (a NUL-delimited mark,
    ``{slot}``, ``[slot]``, a bracketed video slot) is never acceptable.

    >>> fluency_problems("患者10001今年是否被开具过“aspirin”？", "zh", ["aspirin"])
    []
    >>> fluency_problems("2022年哪些月份CPI同比超过2%？", "zh", [])
    []
    >>> fluency_problems("去年有多少患者left医院？", "zh", [])
    ["the Chinese question keeps English words: 'left'"]
    >>> fluency_problems(chr(0) + "0" + chr(0) + "的全称是什么？", "zh", [])[0][:34]
    'the question leaks an internal pla'
    """
    errors: list[str] = []
    leak = _PLACEHOLDER.search(question)
    if leak:
        errors.append(f"the question leaks an internal placeholder: {leak.group()!r}")
    text = question
    for term in sorted({t for t in protected if t.strip()}, key=len, reverse=True):
        text = re.sub(re.escape(term), " ", text, flags=re.I)
    if language == "zh":
        text = _IDENTIFIER.sub(" ", text)
        text = _ACRONYM.sub(" ", text)  # GDP, CPI, ICU: written so in Chinese too
        words = re.findall(r"[A-Za-z]{2,}", text)
        if words:
            shown = ", ".join(repr(w) for w in dict.fromkeys(words))
            errors.append(f"the Chinese question keeps English words: {shown}")
        errors += word_order_problems(question)
        errors += rewrite_problems(question)
    elif language == "en":
        if re.search(r"\[[^\]]*\]", question):
            errors.append("a bracketed slot (say what the video shows in words)")
        chars = re.findall(r"[\u3400-\u9fff]+", text)
        if chars:
            shown = ", ".join(repr(w) for w in dict.fromkeys(chars))
            errors.append(f"the English question keeps Chinese words: {shown}")
    return errors


# English syntax in Chinese words: each pattern is a calque a word-by-word rendering leaves
# (tests/fixtures/builder/fluency_zh.json holds natural and calqued questions for them).
_TIME_WORDS = "在|于|之后|之前|以后|以前|自从|自|从|截至|直到|到"
_CALQUES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^(?:多少|几个|几位|何时|什么时候|哪里)(?!是|为|的|人次)"),
        "a question word opens the sentence before its verb phrase "
        "(Chinese says 有多少…／…是什么时候)",
    ),
    (
        re.compile(r"(?:^|[，,；])\s*是(?:什么|多少|哪些?|谁)(?=[一-鿿])"),
        "'是什么/是多少' stands before what it asks about (English 'what is the X of Y')",
    ),
    (
        re.compile(
            r"(?:死亡|去世|出生|住院|入院|出院|上市|成立|工作|发生|诊断|停留|居住|就诊|"
            r"接受|收治|注册|开具)(?:于|在)(?![^，。？]*?(?:之前|之后|以前|以后|期间|时|内|中))"
            r"[一-鿿\d]"
        ),
        "a place or time phrase follows its verb (Chinese puts 在…/于… before the verb)",
    ),
    (
        re.compile(
            rf"(?:{_TIME_WORDS})\s*(?<!\d)(?:1[89]|2[01])\d\d(?![\d年\-/:.])"
            r"|[一-鿿](?<!患者|病人|编号|号码)(?:1[89]|2[01])\d\d[？?，,。]"
        ),
        "a bare year without 年, after its verb or preposition (English 'after 2015')",
    ),
    (
        re.compile(r"[，,]\s*和(?:何时|什么|哪|多少|谁|是否|为什么|怎样|如何|他们|她们|它们)"),
        "'，和' joins two questions (English ', and when ...')",
    ),
    (re.compile(r"的其(?!他|中|余|次)|其的"), "'的其/其的' (English 'of its')"),
    (
        re.compile(r"([一-鿿]{2,})（\1）"),
        "a term is repeated in brackets after itself",
    ),
    (
        re.compile(r"【[^】]*】|\[[^\]]*\]"),
        "a bracketed slot (say what the video shows in words)",
    ),
    (re.compile(r"字符编码"), "an order by character code (state the order by what it sorts)"),
)


# A rewrite that broke a phrase apart (a video phrase inside a word or number, a unit or
# direction left behind by its number, a word written twice, two quoted names with no 、).
_VIDEO = r"视频(?:里出现|中展示|中所示|中给出)的"
_BREAKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            rf"[0-9A-Za-z]{_VIDEO}|是{_VIDEO}[^，。？；]*?否|{_VIDEO}(?:否|以来|期间|[年月天]前)"
        ),
        "a video phrase stands inside a word or number",
    ),
    (
        re.compile(rf"{_VIDEO}(?:本次|第一次|最后一次|开具|做|接受|被|在|于|是|的)"),
        "a video phrase stands before a word that is not what the video shows",
    ),
    (
        re.compile(
            r"符合视频中给出的条件(?:%|个月|小时|分钟|[岁天年月周次例人元至到]|及?以[上下]|之间)"
        ),
        "a condition's unit or direction is left after the video phrase",
    ),
    (re.compile(r"[在为于]符合视频中给出的条件"), "a preposition before a condition"),
    (re.compile(r"在(?:\d{4}年|视频中所示的那一年)在"), "two 在 phrases in a row (在…在…)"),
    (re.compile(r"([\u3400-\u9fff]{2,})\1"), "a word is written twice in a row"),
    (re.compile(r"”“"), "two quoted names with no 、 between them"),
)


def rewrite_problems(question: str) -> list[str]:
    """Where a rewrite broke a Chinese phrase apart (empty when none).

    >>> rewrite_problems("年龄在符合视频中给出的条件岁及以上的患者有多少人？")[-1]
    'a preposition before a condition'
    >>> rewrite_problems("所需的住院记录记录在视频里。")
    ['a word is written twice in a row']
    >>> rewrite_problems("年龄符合视频中给出的条件的患者有多少人？")
    []
    """
    return [why for pattern, why in _BREAKS if pattern.search(question)]


def word_order_problems(question: str) -> list[str]:
    """Why a Chinese question reads as English syntax in Chinese words (empty if it does not).

    >>> word_order_problems("有多少患者在2102年接受了检查？")
    []
    >>> word_order_problems("多少创业板公司上市之后2015？")[0][:32]
    'a question word opens the senten'
    >>> word_order_problems("哪些患者死亡在医院？")[0][:29]
    'a place or time phrase follow'
    """
    text = question.strip()
    return [why for pattern, why in _CALQUES if pattern.search(text)]


__all__ = [
    "GlossaryEntry",
    "fluency_problems",
    "mentions",
    "numbers",
    "protected_terms",
    "question_problems",
    "rewrite_problems",
    "untranslated_share",
    "word_order_problems",
]
