"""The video's part of a question reads as language, never as a template hole.

Guards what earlier builds wrote: "做过“【视频中所示的名称】”化验的患者有多少人？", "在病房
【视频中所示的“WARDID”】住过的患者有多少人？" and their English twins in brackets. A value
that no phrase can stand for without changing the sentence declines the strategy.
"""

from __future__ import annotations

import pytest

from builder.transform.question import fluency_problems
from builder.video.strategies import PredicateAtom, StrategyRejected, fill_slot


def _atom(column: str, operator: str, literal: str) -> PredicateAtom:
    return PredicateAtom(
        atom_id="P1",
        table="t",
        column=column,
        operator=operator,
        value=literal,
        literal=literal,
        span=(0, 0),
        display=literal,
    )


CASES = [
    (
        "做过“ph”化验的患者有多少人？",
        "ph",
        "LABEL",
        "=",
        "zh",
        "做过视频中展示的化验的患者有多少人？",
    ),
    (
        "在病房52住过的患者有多少人？",
        "52",
        "WARDID",
        "=",
        "zh",
        "在视频里出现的病房住过的患者有多少人？",
    ),
    ("患者30037的性别是什么？", "30037", "SUBJECT_ID", "=", "zh", "视频里出现的患者的性别是什么？"),
    (
        "“呋塞米”的给药途径是什么？",
        "呋塞米",
        "drug",
        "=",
        "zh",
        "视频中展示的药品的给药途径是什么？",
    ),
    (
        "在2104年被诊断为高血压的患者有多少人？",
        "2104年",
        "CHARTTIME",
        "year",
        "zh",
        "在视频中所示的那一年被诊断为高血压的患者有多少人？",
    ),
    (
        "2022年哪些月份CPI同比超过2%？",
        "超过2%",
        "CPI同比(%)",
        ">",
        "zh",
        "2022年哪些月份CPI同比符合视频中给出的条件？",
    ),
    (
        "Has patient 30037 received any procedure this year?",
        "30037",
        "SUBJECT_ID",
        "=",
        "en",
        "Has the patient shown in the video received any procedure this year?",
    ),
    (
        "How many patients had a 'ph' lab test?",
        "'ph'",
        "LABEL",
        "=",
        "en",
        "How many patients had a lab test shown in the video?",
    ),
    (
        "How many patients were admitted in 2104?",
        "2104",
        "ADMITTIME",
        "year",
        "en",
        "How many patients were admitted in the year shown in the video?",
    ),
    (
        "What is the lowest potassium value among patients aged 60 or older?",
        "60 or older",
        "AGE",
        ">=",
        "en",
        "What is the lowest potassium value among patients aged within the range shown in the "
        "video?",
    ),
]


@pytest.mark.parametrize(("question", "literal", "column", "op", "lang", "expected"), CASES)
def test_the_value_is_said_as_what_the_video_shows(question, literal, column, op, lang, expected):
    a = question.index(literal)
    span = (a, a + len(literal))
    if literal.startswith("'"):
        span = (a + 1, a + len(literal) - 1)
    out = fill_slot(question, span, _atom(column, op, literal.strip("'")), lang)
    assert out == expected
    assert "【" not in out and "[" not in out and column not in out
    assert fluency_problems(out, lang, []) == []


@pytest.mark.parametrize(
    ("question", "literal", "column", "op", "lang"),
    [
        ("在2103年于医院死亡的患者有哪些？", "死亡", "DISCHARGE_LOCATION", "=", "zh"),
        ("Which companies are registered in Shanghai?", "Shanghai", "RegisterCity", "=", "en"),
        ("Which companies paid a dividend of 10 RMB per 10 shares?", "10", "Cash", ">", "en"),
    ],
)
def test_a_value_no_phrase_can_stand_for_declines_the_strategy(question, literal, column, op, lang):
    a = question.index(literal)
    with pytest.raises(StrategyRejected):
        fill_slot(question, (a, a + len(literal)), _atom(column, op, literal), lang)
