"""The video's part of a question reads as language, never as a template hole.

Guards what earlier builds wrote: "做过“【视频中所示的名称】”化验的患者有多少人？", "在病房
【视频中所示的“WARDID”】住过的患者有多少人？" and their English twins in brackets. A value
that no phrase can stand for without changing the sentence declines the strategy.
"""

from __future__ import annotations

import sqlite3

import pytest

from builder.transform.question import fluency_problems
from builder.video.atoms import AtomSet, extract_atoms, question_span
from builder.video.storyboard import DeterministicPlanner
from builder.video.strategies import (
    PredicateAtom,
    StrategyRejected,
    answer_evidence,
    fill_slot,
    predicate_abstraction,
)


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


# Rewrites a native reader had to redo in an earlier MIMIC build, each with the question it
# came from: the video phrase replaced a literal inside a longer expression ("年龄在符合视频中
# 给出的条件岁及以上", "在视频里出现的本次住院期间"), took a verb for a noun ("被视频里出现的
# 开具"), or stacked two 在 phrases.
BROKEN = [
    (
        "自2102年以来年龄在60岁及以上的患者最常被开具的前5种药物是什么？",
        [("AGE", ">=", 60)],
        "自2102年以来年龄符合视频中给出的条件的患者最常被开具的前5种药物是什么？",
    ),
    (
        "截至3年前年龄在60岁及以上的患者最常做的前4项化验是什么？",
        [("年龄", ">=", 60)],
        "截至3年前年龄符合视频中给出的条件的患者最常做的前4项化验是什么？",
    ),
    (
        "患者44228在本次住院期间第一次做“pt”化验至今已经过去了多少小时？",
        [("LABEL", "=", "pt"), ("SUBJECT_ID", "=", 44228)],
        "视频里出现的患者在本次住院期间第一次做视频中展示的化验至今已经过去了多少小时？",
    ),
    (
        "在2102年在病房12住过的患者有多少人？",
        [("INTIME", "year", 2102), ("WARDID", "=", 12)],
        "视频中所示的那一年在视频里出现的病房住过的患者有多少人？",
    ),
    (
        "对同样被开具“cefepime”的患者，在同一时间最常一并开具的前4种药物是什么？",
        [("DRUG", "=", "cefepime")],
        "对同样被开具视频中展示的药品的患者，在同一时间最常一并开具的前4种药物是什么？",
    ),
    (
        "名为“ziprasidone”的药物的费用是多少？",
        [("药品", "=", "ziprasidone")],
        "视频中展示的药物的费用是多少？",
    ),
    (
        "患者10017是否有“aspirin”的处方？",
        [("DRUG", "=", "aspirin")],
        "患者10017是否有视频中展示的药品的处方？",
    ),
]


def _conn() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        'create table t (ROW_ID integer primary key, AGE integer, "年龄" integer, LABEL text, '
        'SUBJECT_ID integer, INTIME text, WARDID integer, DRUG text, "药品" text)'
    )
    conn.executemany(
        "insert into t values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                n,
                40 + 5 * n,
                40 + 5 * n,
                f"lab{n}",
                44220 + n,
                f"210{n % 6}-01-0{1 + n % 8}",
                n,
                f"drug{n}",
                f"drug{n}",
            )
            for n in range(10)
        ],
    )
    return conn


def _atoms(question: str, specs: list[tuple[str, str, object]]) -> AtomSet:
    atoms = []
    for n, (column, op, value) in enumerate(specs, start=1):
        literal = str(value)
        atoms.append(
            PredicateAtom(
                atom_id=f"P{n}",
                table="t",
                column=column,
                operator=op,
                value=value,
                literal=literal,
                span=question_span(question, literal, value),
                display=literal,
            )
        )
    return AtomSet(predicates=tuple(atoms), answers=())


@pytest.mark.parametrize(("question", "specs", "expected"), BROKEN)
def test_a_video_phrase_replaces_the_whole_expression(question, specs, expected):
    plan = predicate_abstraction(
        _atoms(question, specs), question=question, conn=_conn(), language="zh", seed=0
    )
    assert plan.question == expected
    assert fluency_problems(plan.question, "zh", []) == []


@pytest.mark.parametrize(
    ("question", "literal", "column", "op", "why"),
    [
        # "自1视频里出现的年前": a time phrase is no noun for the video to name
        ("自1年前12以来出院的患者有多少人？", "12", "WARDID", "=", "no noun"),
        # one end of a range: "年龄在符合视频中给出的条件至59岁之间"
        ("年龄在50至59岁之间的患者有多少人？", "50", "AGE", ">=", "one end of a range"),
        # the unit runs on into a word no direction closes
        ("住院60天数的患者有多少人？", "60", "LOS", ">=", "runs on"),
        # a number followed by its unit, with no noun before it: "视频中展示的岁"
        ("有60岁的患者吗？", "60", "AGE", "=", "runs on into the word after it"),
    ],
)
def test_a_literal_inside_a_longer_expression_declines_the_strategy(
    question, literal, column, op, why
):
    a = question.index(literal)
    with pytest.raises(StrategyRejected, match=why):
        fill_slot(question, (a, a + len(literal)), _atom(column, op, literal), "zh")


def test_part_of_a_longer_number_is_never_replaced():
    question = "住院编号为1234的患者有多少人？"
    with pytest.raises(StrategyRejected, match="part of a longer word or number"):
        fill_slot(question, (6, 8), _atom("HADM_ID", "=", "23"), "zh")


def test_a_withheld_table_named_records_is_not_called_records_twice():
    conn = sqlite3.connect(":memory:")
    conn.execute('create table "住院记录" ("患者编号" integer, "婚姻状况" text)')
    conn.executemany(
        'insert into "住院记录" values (?, ?)', [(1, "已婚"), (2, "未婚"), (3, "离异")]
    )
    conn.commit()  # a task database holds committed rows (a backup waits on an open write)
    sql = 'select "婚姻状况" from "住院记录" where "患者编号" = 1'
    header, rows = ("婚姻状况",), [("已婚",)]
    question = "患者1的婚姻状况是什么？"
    schema = {"住院记录": ("患者编号", "婚姻状况")}
    plan = answer_evidence(
        extract_atoms(sql, header, rows, question, schema=schema),
        sql=sql,
        question=question,
        conn=conn,
        header=header,
        rows=rows,
        ordered=False,
        schema=schema,
        language="zh",
        seed=0,
    )
    assert plan.note == "所需的住院记录在视频里，工作区中没有这张表"
    board = DeterministicPlanner().plan(plan)
    narration = " ".join(s.narration for s in board.scenes)
    assert "住院记录" in narration and "记录记录" not in narration
