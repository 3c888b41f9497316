"""Chinese questions from translated EHRSQL templates, with phrases derived from the SQL."""

from __future__ import annotations

import json

import pytest

from builder.semantics import note, rank_limit, tie_clause
from builder.transform.question import fluency_problems
from builder.translate.templates import TemplateMiss, load_templates, render_question

NOW = "'2105-12-31 23:59:00'"


def test_top_n_with_a_relative_year_reads_as_chinese():
    sql = (
        "select d_icd_diagnoses.short_title from d_icd_diagnoses where d_icd_diagnoses.icd9_code"
        " in ( select t1.icd9_code from ( select diagnoses_icd.icd9_code, dense_rank() over "
        "( order by count(*) desc ) as c1 from diagnoses_icd where datetime(diagnoses_icd."
        f"charttime) >= datetime({NOW},'-4 year') group by diagnoses_icd.icd9_code ) as t1 "
        "where t1.c1 <= 3 )"
    )
    q = render_question(
        "what are_verb the top [n_rank] frequent diagnoses [time_filter_global1]?",
        {},
        sql,
        target_of=str,
    )
    assert q == "自4年前以来最常见的前3种诊断是什么？"
    assert rank_limit(sql) == 3


def test_values_take_their_target_form_and_first_last_come_from_the_ordering():
    sql = (
        "select labevents.charttime from labevents where labevents.hadm_id in ( select "
        "admissions.hadm_id from admissions where admissions.subject_id = 10027 and "
        "admissions.dischtime is null ) and labevents.itemid in ( select d_labitems.itemid "
        "from d_labitems where d_labitems.label = 'potassium' ) order by labevents.charttime "
        "desc limit 1"
    )
    q = render_question(
        "when was the [time_filter_exact1] time that patient {patient_id} received a "
        "{lab_name} lab test [time_filter_global1]?",
        {"patient_id": 10027, "lab_name": "potassium"},
        sql,
        target_of={"potassium": "钾"}.get,
    )
    assert q == "患者10027在本次住院期间最后一次做“钾”化验是什么时候？"
    assert fluency_problems(q, "zh", []) == []


def test_a_phrase_the_sql_does_not_determine_is_a_miss_not_a_guess():
    with pytest.raises(TemplateMiss, match="no dense_rank cutoff"):
        render_question(
            "what are_verb the top [n_rank] frequent procedures [time_filter_global1]?",
            {},
            "select 1",
            target_of=str,
        )
    with pytest.raises(TemplateMiss, match="no zh template"):
        render_question("an unknown template?", {}, "select 1", target_of=str)
    with pytest.raises(TemplateMiss, match="no value for"):
        render_question(
            "what is the gender of patient {patient_id}?", {}, "select 1", target_of=str
        )


def test_the_tie_rule_is_stated_in_the_question_language():
    assert "并列" in tie_clause(3, "zh") and "3" in tie_clause(3, "zh")
    assert "不跳号" in tie_clause(3, "zh") and "跳过" in tie_clause(3, "zh", dense=False)
    assert note([tie_clause(1, "en")], "en").startswith("Rows that tie share a rank")


def test_every_template_of_the_valid_split_renders_fluent_chinese(mimic_demo):
    templates = load_templates("zh")
    rows = [json.loads(line) for line in (mimic_demo / "ehrsql_mimic3_demo.jsonl").open()]
    assert {r["q_tag"] for r in rows} <= set(templates)
    rendered = 0
    for r in rows:
        q = render_question(r["q_tag"], r["value"], r["sql"], target_of=str)
        values = [str(v) for v in r["value"].values()]
        assert fluency_problems(q, "zh", values) == [], (r["id"], q)
        rendered += 1
    assert rendered == len(rows) == 365
