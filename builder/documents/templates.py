"""The offline ``template`` writer: varied long-form prose in English and Chinese.

Each section is a short lead paragraph (connective prose) and one paragraph per record: an
opener naming the record's anchor values, clauses for the cluster's fields (each value
formatted by its kind and the plan's date and number styles), the null policy applied to
missing fields, and now and then a distractor sentence (harmless context that states no
number, date or field value). Phrasing is drawn from per-genre pools with a seeded random
source, so two documents of the same table read differently across seeds while every
reply is reproducible. Its replies pass through the same validators as a model's.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from builder.documents.blocks import Block, Cell
from builder.documents.plan import CLINICAL_GENRES, GENRES, DocumentPlan
from builder.documents.validators import Alignment
from builder.documents.values import format_value
from builder.documents.writers import SectionReply, SectionRequest

logger = logging.getLogger(__name__)

_CLINICAL = CLINICAL_GENRES

_EN: dict[str, Any] = {
    "openers": [
        "Regarding {a}, ",
        "For {a}, ",
        "The entry for {a} shows that ",
        "Turning to {a}, ",
        "In the case of {a}, ",
        "As logged for {a}, ",
        "Next comes {a}: ",
    ],
    "clauses": {
        "identifier": [
            "the {l} is {v}",
            "it references {l} {v}",
            "the linked {l} is {v}",
            "{l} {v} is attached to it",
        ],
        "integer": [
            "the {l} stands at {v}",
            "a {l} of {v} is reported",
            "the {l} comes to {v}",
            "the {l} was entered as {v}",
        ],
        "decimal": [
            "the {l} stands at {v}",
            "a {l} of {v} is reported",
            "the {l} comes to {v}",
            "the {l} was entered as {v}",
        ],
        "date": ["the {l} is {v}", "the {l} falls on {v}", "the {l} was logged as {v}"],
        "datetime": ["the {l} is {v}", "the {l} was logged as {v}", "the {l} reads {v}"],
        "text": [
            "the {l} is “{v}”",
            "the {l} reads “{v}”",
            "the {l} is given as “{v}”",
            "it lists “{v}” as the {l}",
        ],
    },
    "joins": [", and ", "; ", ", while "],
    "nulls": [
        "The {l} is not recorded for this entry.",
        "No value is on file for the {l}; it is not recorded.",
        "The {l} field was left blank and is not recorded.",
    ],
    "leads": [
        "The entries below continue the {g}.",
        "This section turns to the {c} of the following records.",
        "Read together with the earlier sections, the following entries complete the "
        "picture of the {c}.",
        "What follows sets out the {c} for the next group of records.",
        "The {g} resumes here with the {c}.",
    ],
    "closers": [
        "Further sections return to these records under other headings.",
        "Any discrepancy should be raised with the records office before sign-off.",
        "These entries were carried over without change from the source register.",
    ],
    "distractors_clinical": [
        "The entry was cross-checked against the ward's routine log.",
        "Nursing staff confirmed the entry during the regular review.",
        "No follow-up note accompanies this entry.",
        "The record was transcribed from the unit's primary chart.",
        "A reviewer initialled the entry without comment.",
    ],
    "distractors_finance": [
        "The figures were reconciled against the custodian's statement.",
        "Analysts flagged no irregularity for this item.",
        "The disclosure follows the standard reporting template.",
        "Compliance staff reviewed the item during the quarterly close.",
        "The source filing carries no further remarks on this item.",
    ],
    "preface": [
        "This {g} sets out every entry of the {t} register in narrative form.",
        "Each entry is introduced by its identifying fields, which recur in every "
        "section so that details given in different sections can be joined.",
        "Fields without a recorded value are {n}.",
    ],
    "null_state": "stated as not recorded",
    "null_omit": "simply left out",
    "guide": "Field guide: {f}.",
}

_ZH: dict[str, Any] = {
    "openers": [
        "关于{a}的记录，",
        "{a}这一条目中，",
        "就{a}而言，",
        "台账显示，{a}的条目中，",
        "接下来是{a}：",
        "对于{a}，",
    ],
    "clauses": {
        "identifier": ["{l}为{v}", "关联的{l}是{v}", "其{l}登记为{v}"],
        "integer": ["{l}为{v}", "{l}记为{v}", "登记的{l}是{v}"],
        "decimal": ["{l}为{v}", "{l}记为{v}", "登记的{l}是{v}"],
        "date": ["{l}为{v}", "{l}记录在{v}", "{l}登记为{v}"],
        "datetime": ["{l}为{v}", "{l}记录在{v}", "{l}登记为{v}"],
        "text": ["{l}为“{v}”", "{l}登记为“{v}”", "所列{l}是“{v}”"],
    },
    "joins": ["，", "；"],
    "nulls": ["{l}未记录。", "该条目的{l}缺失，未记录。", "{l}一栏空缺，未记录。"],
    "leads": [
        "以下条目延续本{g}的内容。",
        "本节汇总以下记录的{c}。",
        "结合前文各节，以下条目补充了{c}方面的信息。",
        "下面列出下一组记录的{c}。",
    ],
    "closers": [
        "后续各节将在其他标题下再次提及这些记录。",
        "如有疑问，请在签核前与档案室核对。",
        "以上条目均按原始登记照录。",
    ],
    "distractors_clinical": [
        "该条目已在例行复核中核对。",
        "病区护士在常规检查中确认了该条目。",
        "该条目未附后续说明。",
        "该记录转录自病区的原始病历。",
    ],
    "distractors_finance": [
        "相关数据已与托管机构的对账单核对。",
        "分析人员未发现该项目存在异常。",
        "该披露遵循标准报告模板。",
        "合规人员在季度结账时复核了该项目。",
    ],
    "preface": [
        "本{g}以叙述形式列出{t}登记表中的全部条目。",
        "每个条目都以其标识字段开头，这些字段会在各节中重复出现，便于将不同章节中的信息关联起来。",
        "没有记录值的字段{n}。",
    ],
    "null_state": "会注明“未记录”",
    "null_omit": "将直接略去",
    "guide": "字段说明：{f}。",
}


def pools(language: str) -> dict[str, Any]:
    """The phrase pools of a language."""
    return _ZH if language == "zh" else _EN


def surface(cell: Cell, plan: DocumentPlan) -> str:
    """The text that expresses one cell under the plan's styles."""
    if cell.kind in ("date", "datetime"):
        return format_value(cell.value, cell.kind, date_style=plan.date_style)
    return format_value(cell.value, cell.kind, thousands=plan.thousands)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _genre(plan: DocumentPlan) -> str:
    name = GENRES.get(plan.genre, {}).get(plan.language, plan.genre)
    return name if plan.language == "zh" else name.lower()


def preface(plan: DocumentPlan) -> list[str]:
    """Opening paragraphs of a document (no numbers or dates, so nothing competes)."""
    p = pools(plan.language)
    t = plan.table
    n = p["null_state"] if plan.null_policy == "state" else p["null_omit"]
    out = [s.format(g=_genre(plan), t=t, n=n) for s in p["preface"]]
    sep = "、" if plan.language == "zh" else ", "
    fields = sep.join(f"{c.label} ({c.name})" for c in plan.columns)
    out.append(p["guide"].format(f=fields))
    return [" ".join(out[:3]) if plan.language == "en" else "".join(out[:3]), out[3]]


class TemplateWriter:
    """Deterministic sections from phrase pools.

    Args:
        distractor_share: share of record paragraphs that get a distractor sentence.
        connective_share: share of sections that get a lead and a closing paragraph.
    """

    name = "template"

    def __init__(self, *, distractor_share: float = 0.35, connective_share: float = 0.6) -> None:
        self.distractor_share = distractor_share
        self.connective_share = connective_share

    def write(self, request: SectionRequest) -> SectionReply:
        """Write one section and its alignments."""
        plan, block = request.plan, request.block
        rng = random.Random(f"{plan.seed}:{plan.table}:{block.block_id}:{request.attempt}")
        p = pools(plan.language)
        zh = plan.language == "zh"
        paragraphs: list[str] = []
        alignments: list[Alignment] = []
        connective = rng.random() < self.connective_share
        if connective:
            paragraphs.append(rng.choice(p["leads"]).format(g=_genre(plan), c=block.cluster_name))
        kind = "distractors_clinical" if plan.genre in _CLINICAL else "distractors_finance"
        for row in block.rows:
            text, aligned = self._record(plan, block, row, rng, p, zh)
            if rng.random() < self.distractor_share:
                text += ("" if zh else " ") + rng.choice(p[kind])
            paragraphs.append(text)
            alignments += aligned
        if connective and rng.random() < 0.5:
            paragraphs.append(rng.choice(p["closers"]))
        body = "\n\n".join(paragraphs)
        return SectionReply(section=body, alignments=tuple(alignments), raw=body)

    def _record(
        self,
        plan: DocumentPlan,
        block: Block,
        row: int,
        rng: random.Random,
        p: dict[str, Any],
        zh: bool,
    ) -> tuple[str, list[Alignment]]:
        aligned: list[Alignment] = []
        anchor_bits = []
        for cell in block.anchor_cells(row):
            s = surface(cell, plan)
            aligned.append(Alignment(cell_id=cell.cell_id, surface=s))
            anchor_bits.append(f"{cell.label}为{s}" if zh else f"{cell.label} {s}")
        anchor = ("、" if zh else " and ").join(anchor_bits)
        clauses, nulls = [], []
        for cell in block.record(row):
            if cell.anchor:
                continue
            if cell.is_null:
                if plan.null_policy == "state":
                    phrase = rng.choice(p["nulls"]).format(l=cell.label)
                    nulls.append(phrase)
                    aligned.append(Alignment(cell_id=cell.cell_id, surface=phrase.rstrip(".。")))
                continue
            s = surface(cell, plan)
            aligned.append(Alignment(cell_id=cell.cell_id, surface=s))
            clauses.append(rng.choice(p["clauses"][cell.kind]).format(l=cell.label, v=s))
        opener = rng.choice(p["openers"]).format(a=anchor)
        sentences = []
        if not clauses:
            clauses = [
                "该条目仅登记了标识字段" if zh else "only its identifying fields are on file"
            ]
        first, rest = clauses[:2], clauses[2:]
        join = rng.choice(p["joins"])
        sentences.append(opener + join.join(first) + ("。" if zh else "."))
        while rest:
            chunk, rest = rest[:2], rest[2:]
            text = rng.choice(p["joins"]).join(chunk)
            sentences.append((text if zh else _cap(text)) + ("。" if zh else "."))
        sentences += nulls
        if not zh:
            sentences[0] = _cap(sentences[0])
        return ("" if zh else " ").join(sentences), aligned


__all__ = ["TemplateWriter", "preface", "surface"]
