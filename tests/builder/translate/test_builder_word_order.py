"""Chinese questions in Chinese word order, or none: the fluency gate and the offline path.

Guards the calques earlier builds shipped ("多少创业板（创业板）公司上市之后2015？", "哪些患者
死亡在医院在2103，和何时他们出院？", bracketed video slots): the gate flags every calqued
question of the corpus and none of the natural ones, and the glossary translator writes a
Chinese question only through a whole-sentence template.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.transform.question import fluency_problems, rewrite_problems, word_order_problems
from builder.translate.base import ReplyError, TranslationRequest
from builder.translate.glossary import GlossaryTranslator

CORPUS = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "builder" / "fluency_zh.json").read_text("utf-8")
)


@pytest.mark.parametrize("question", CORPUS["natural"])
def test_a_natural_question_passes_the_gate(question):
    assert word_order_problems(question) == []
    assert fluency_problems(question, "zh", ["danazol"]) == []


@pytest.mark.parametrize("question", CORPUS["calqued"])
def test_a_calqued_question_is_flagged(question):
    assert word_order_problems(question), question
    assert fluency_problems(question, "zh", []), question


def test_the_corpus_is_large_enough_to_mean_something():
    assert len(CORPUS["natural"]) >= 20 and len(CORPUS["calqued"]) >= 20


def _question(text: str, target: str = "zh") -> TranslationRequest:
    return TranslationRequest(
        kind="question",
        source_language="en" if target == "zh" else "zh",
        target_language=target,
        payload={"source_question": text, "focused_glossary": [], "sql_context": "select 1"},
    )


def test_the_glossary_translator_refuses_a_chinese_question_no_template_covers():
    translator = GlossaryTranslator()
    with pytest.raises(ReplyError, match="no sentence template covers this question"):
        translator.complete(_question("How many funds were listed after 2015?"))


def test_a_template_gives_chinese_word_order():
    reply = GlossaryTranslator().complete(_question("what is the gender of patients?"))
    assert reply["question"].endswith("是什么？")
    assert word_order_problems(reply["question"]) == []


def test_english_targets_keep_the_phrase_fallback():
    reply = GlossaryTranslator().complete(_question("多少基金？", target="en"))
    assert reply["question"]


@pytest.mark.parametrize("question", CORPUS["broken"])
def test_a_rewrite_that_broke_a_phrase_apart_is_flagged(question):
    assert rewrite_problems(question), question
    assert fluency_problems(question, "zh", ["warfarin", "albuterol mdi", "glucagon"]), question


def test_the_offline_templates_write_no_broken_phrase():
    from builder.translate.templates import render_question

    drugs = render_question(
        "has_verb patient {patient_id} been prescribed {drug_name1}, {drug_name2}, or "
        "{drug_name3} [time_filter_global1]?",
        {
            "patient_id": 40286,
            "drug_name1": "warfarin",
            "drug_name2": "albuterol mdi",
            "drug_name3": "glucagon",
        },
        "select count(*)>0 from prescriptions where prescriptions.drug in ( 'warfarin' )",
        target_of=str,
    )
    ward = render_question(
        "count the number of patients who stayed in ward {ward_id} [time_filter_global1].",
        {"ward_id": 12.0},
        "select count(*) from transfers where transfers.wardid = 12 and "
        "strftime('%Y',transfers.intime) = '2102'",
        target_of=str,
    )
    assert drugs == "患者40286是否被开具过“warfarin”、“albuterol mdi”或“glucagon”？"
    assert ward == "2102年在病房12住过的患者有多少人？"
    assert rewrite_problems(drugs) == rewrite_problems(ward) == []
