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

from builder.transform.question import fluency_problems, word_order_problems
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
