"""The glossary translator protects focused-glossary entities before anything else runs."""

from __future__ import annotations

from builder.translate.glossary import Glossary, translate_text

PAIRS = {"what does": "", "stand for": "代表什么", "what is the": "", "cost": "费用"}


def test_a_quoted_entity_keeps_its_translation_inside_the_quotes():
    out, used, unknown = translate_text(
        'What is the unabbreviated version of "hb"?',
        "en",
        "zh",
        {"what is the": "", "unabbreviated version": "全称", "of": "的"},
        {"hb": "血红蛋白"},
    )
    assert "\x00" not in out
    assert "血红蛋白" in out
    assert used == ["hb"]
    assert unknown == []


def test_a_template_cannot_split_an_entity_that_contains_of():
    glossary = Glossary(
        [{"templates": [{"en": "what is the {a} of {b}?", "zh": "{b}的{a}是什么？"}]}]
    )
    templates = glossary.templates("en", "zh")
    out, used, _unknown = translate_text(
        "What is the cost of tincture of opium?",
        "en",
        "zh",
        {"cost": "费用"},
        {"tincture of opium": "阿片酊"},
        templates,
    )
    assert out == "阿片酊的费用是什么？"
    assert used == ["tincture of opium"]
    # Without the entity the template still reorders the sentence.
    out2, _u, _k = translate_text(
        "What is the cost of aspirin?",
        "en",
        "zh",
        {"cost": "费用"},
        {"aspirin": "阿司匹林"},
        templates,
    )
    assert out2 == "阿司匹林的费用是什么？"
