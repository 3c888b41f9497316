"""Storyboards, and their deterministic and ``llm`` planners.

A scene has a duration, evidence ids, a visual component, exact constants, visible text
and narration.

Whatever plans the scenes, the constants inside components are filled from the typed
evidence records, never copied from a planner's text: a planner chooses which atoms and
records go to which scene and component, the titles and the narration. ``check_storyboard``
then requires every atom in at least one scene with its exact display text, only supplied
records, known components and sane durations; an ``llm`` plan that fails goes back to the
model with the errors, a bounded number of times (``dataspace.ask``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from builder.documents.plan import column_label
from builder.errors import Rejected
from builder.video.atoms import PredicateAtom, display
from builder.video.strategies import EvidencePlan, SupportRecord
from dataspace.ask import Rejection, ask, extract_json, retry_messages
from dataspace.errors import ConfigError, ReplyError
from dataspace.registry import Registry

logger = logging.getLogger(__name__)

COMPONENTS = ("title", "card", "table", "bar_chart", "line_chart", "config_panel", "time_window")
OPERATOR_TEXT = {"=": "=", "!=": "≠", ">": ">", ">=": "≥", "<": "<", "<=": "≤", "year": "="}


class StoryboardRejected(Rejected, ValueError):
    """No valid storyboard could be made; carries a one-line reason."""

    stage_name = "video"


@dataclass(frozen=True, kw_only=True)
class Scene:
    """One scene.

    Attributes:
        scene_id: ``S1`` ...
        duration: planned seconds (narration may lengthen it).
        evidence_ids: atoms this scene carries.
        component: the visual component spec (``type`` is one of ``COMPONENTS``).
        constants: atom id -> the exact text shown for it.
        visible_text: every text shown.
        narration: what is spoken.
    """

    scene_id: str
    duration: float
    evidence_ids: tuple[str, ...]
    component: Mapping[str, Any]
    constants: Mapping[str, str]
    visible_text: tuple[str, ...]
    narration: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "scene_id": self.scene_id,
            "duration": round(self.duration, 3),
            "evidence_ids": list(self.evidence_ids),
            "component": dict(self.component),
            "data_constants": [{"atom_id": k, "value": v} for k, v in self.constants.items()],
            "visible_text": list(self.visible_text),
            "narration": self.narration,
        }


@dataclass(frozen=True, kw_only=True)
class Storyboard:
    """The scenes of one video."""

    title: str
    language: str
    strategy: str
    scenes: tuple[Scene, ...]
    planner: str = "deterministic"
    attempts: int = 1
    rejected: tuple[str, ...] = ()

    @property
    def duration(self) -> float:
        """Planned seconds."""
        return sum(s.duration for s in self.scenes)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "title": self.title,
            "language": self.language,
            "strategy": self.strategy,
            "planner": self.planner,
            "attempts": self.attempts,
            "rejected": list(self.rejected),
            "scenes": [s.to_json() for s in self.scenes],
        }


# ---- components compiled from typed evidence ------------------------------------------------


def _texts(language: str) -> dict[str, str]:
    if language == "zh":
        return {
            "brief": "数据简报",
            "rule": "预警规则配置",
            "field": "触发字段",
            "direction": "方向",
            "cutoff": "阈值",
            "window": "时间窗口",
            "scope": "监控对象",
            "boundary": "阈值附近的记录",
            "status": "状态",
            "pass": "满足",
            "fail": "不满足",
            "others": "近期复核、不在范围内",
            "records": "记录",
            "apply": "请将以上规则应用于工作区中的记录",
            "evidence": "请结合以上记录回答问题",
            "chart": "数值对比",
            "year": "年份",
        }
    return {
        "brief": "Data briefing",
        "rule": "Alert rule configuration",
        "field": "Trigger field",
        "direction": "Direction",
        "cutoff": "Cutoff",
        "window": "Time window",
        "scope": "Monitored",
        "boundary": "Records around the cutoff",
        "status": "Status",
        "pass": "meets",
        "fail": "does not meet",
        "others": "Reviewed, not in scope",
        "records": "records",
        "apply": "Apply this rule to the records in the workspace",
        "evidence": "Use these records to answer the question",
        "chart": "Values compared",
        "year": "Year",
    }


def component_for(
    kind: str, plan: EvidencePlan, atom_ids: Sequence[str], record_ids: Sequence[str], title: str
) -> dict[str, Any]:
    """A component spec whose constants come from the typed atoms and records.

    Raises:
        StoryboardRejected: the component cannot carry those atoms or records.
    """
    t = _texts(plan.language)
    atoms = {a.atom_id: a for a in plan.atoms}
    records = {r.record_id: r for r in plan.records}
    for aid in atom_ids:
        if aid not in atoms:
            raise StoryboardRejected(f"unknown evidence id {aid!r}")
    for rid in record_ids:
        if rid not in records:
            raise StoryboardRejected(f"unknown record {rid!r} (use only supplied records)")
    if kind == "title":
        return {"type": "title", "title": title, "subtitle": t["brief"]}
    if kind == "config_panel":
        preds = [p for p in (atoms[a] for a in atom_ids) if isinstance(p, PredicateAtom)]
        if len(preds) != 1 or preds[0].operator in ("=", "year"):
            raise StoryboardRejected("a configuration panel carries one comparison atom")
        p = preds[0]
        return {
            "type": "config_panel",
            "title": title or t["rule"],
            "rows": [
                [t["field"], p.column, None],
                [t["direction"], OPERATOR_TEXT[p.operator], None],
                [t["cutoff"], p.display, p.atom_id],
            ],
        }
    if kind == "time_window":
        preds = [p for p in (atoms[a] for a in atom_ids) if isinstance(p, PredicateAtom)]
        if len(preds) != 1 or preds[0].operator != "year":
            raise StoryboardRejected("a time window carries one year atom")
        p = preds[0]
        return {
            "type": "time_window",
            "title": title or t["window"],
            "field": p.column,
            "label": t["year"],
            "value": p.display,
            "atom": p.atom_id,
        }
    if kind == "card":
        items: list[list[str | None]] = []
        for aid in atom_ids:
            a = atoms[aid]
            if isinstance(a, PredicateAtom):
                if a.operator != "=":
                    raise StoryboardRejected("a card carries equality atoms or answer cells")
                items.append(
                    [f"{t['scope']} {column_label(a.column, plan.language)}", a.display, aid]
                )
            else:
                rid, col = plan.cells[aid]
                rec = records[rid]
                items.append([f"{_record_name(rec)} · {col}", a.display, aid])
        for rid in record_ids:
            rec = records[rid]
            items.append([t["others"], display(rec.values[-1]), None])
        return {"type": "card", "title": title, "items": items}
    if kind in ("table", "bar_chart", "line_chart"):
        recs = [records[r] for r in record_ids]
        if not recs:
            raise StoryboardRejected(f"a {kind} needs supplied records")
        columns = list(recs[0].columns)
        if any(r.columns != recs[0].columns for r in recs):
            raise StoryboardRejected(f"a {kind} shows records of one shape")
        cell_atoms = {v: k for k, v in plan.cells.items()}
        if kind == "table":
            with_status = plan.strategy == "predicate_abstraction"
            head = columns + ([t["status"]] if with_status else [])
            rows = []
            for rec in recs:
                cells = [
                    [display(v), cell_atoms.get((rec.record_id, c))]
                    for c, v in zip(rec.columns, rec.values, strict=True)
                ]
                if with_status:
                    cells.append(
                        [
                            t["pass"]
                            if rec.role == "pass"
                            else t["fail"]
                            if rec.role == "fail"
                            else t["others"],
                            None,
                        ]
                    )
                rows.append(cells)
            return {"type": "table", "title": title, "columns": head, "rows": rows}
        numeric = [i for i, c in enumerate(columns) if is_measure(c, [r.values[i] for r in recs])]
        if not numeric:
            raise StoryboardRejected(f"a {kind} needs a measure column (identifiers are not)")
        i = numeric[-1]
        return {
            "type": kind,
            "title": title or t["chart"],
            "field": columns[i],
            "labels": [_record_name(r) for r in recs],
            "values": [float(r.values[i]) for r in recs],
            "value_text": [
                [display(r.values[i]), cell_atoms.get((r.record_id, columns[i]))] for r in recs
            ],
        }
    raise StoryboardRejected(f"unknown component {kind!r}; known: {list(COMPONENTS)}")


_IDENTIFIER_NAME = re.compile(
    r"(^|_)(id|code|no|num|key)$|id$|code$|编号|代码|编码|序号|标识|ID$|号$", re.I
)


def is_measure(column: str, values: Sequence[Any]) -> bool:
    """Whether a column holds a measure a chart may plot (numbers that are not identifiers).

    >>> is_measure("valuenum", [1.5, 3]), is_measure("itemid", [50912, 51006])
    (True, False)
    >>> is_measure("患者编号", [10006, 10011]), is_measure("cost", [3, 12])
    (False, True)
    """
    present = [v for v in values if v is not None]
    if not present or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in present
    ):
        return False
    return not _IDENTIFIER_NAME.search(column)


def _record_name(rec: SupportRecord) -> str:
    return display(rec.values[0])


def component_texts(component: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Every text a component shows, and atom id -> its text."""
    texts: list[str] = []
    constants: dict[str, str] = {}
    kind = component["type"]

    def add(text: str, atom: str | None = None) -> None:
        texts.append(text)
        if atom:
            constants.setdefault(atom, text)

    if component.get("title"):
        add(component["title"])
    if kind == "title":
        add(component["subtitle"])
    elif kind == "config_panel":
        for label, value, atom in component["rows"]:
            add(label)
            add(value, atom)
    elif kind == "time_window":
        add(component["field"])
        add(component["label"])
        add(component["value"], component["atom"])
    elif kind == "card":
        for label, value, atom in component["items"]:
            add(label)
            add(value, atom)
    elif kind == "table":
        for c in component["columns"]:
            add(str(c))
        for row in component["rows"]:
            for value, atom in row:
                add(value, atom)
    elif kind in ("bar_chart", "line_chart"):
        add(component["field"])
        for label in component["labels"]:
            add(label)
        for value, atom in component["value_text"]:
            add(value, atom)
    return texts, constants


def make_scene(
    n: int,
    plan: EvidencePlan,
    kind: str,
    *,
    atoms: Sequence[str] = (),
    records: Sequence[str] = (),
    title: str = "",
    narration: str = "",
    duration: float = 3.0,
) -> Scene:
    """Compile one scene (component constants from the typed evidence)."""
    comp = component_for(kind, plan, atoms, records, title)
    texts, constants = component_texts(comp)
    return Scene(
        scene_id=f"S{n}",
        duration=float(duration),
        evidence_ids=tuple(a for a in atoms if a in constants) or tuple(constants),
        component=comp,
        constants=constants,
        visible_text=tuple(texts),
        narration=narration,
    )


# ---- planners -------------------------------------------------------------------------------


class StoryboardPlanner(Protocol):
    """Plans the scenes of one video.

    Attributes:
        name: the planner name recorded in the ledger.
    """

    name: str

    def plan(self, evidence: EvidencePlan, *, scene_seconds: float) -> Storyboard:
        """Plan a storyboard carrying every atom of ``evidence``.

        Raises:
            StoryboardRejected: no valid storyboard.
        """
        ...


def _narration(language: str, key: str, **kw: Any) -> str:
    en = {
        "intro": "This briefing sets out the rule behind an analysis of the {t} records.",
        "scope": "The monitored {l} is shown on this card.",
        "others": "These values were reviewed recently but are out of scope.",
        "boundary": "Here are real records on either side of the decision boundary.",
        "panel": "The configuration panel defines the trigger field, its direction and the cutoff.",
        "window": "The analysis only considers records inside this time window.",
        "close": "Apply the rule to the records in the workspace.",
        "aintro": "This briefing presents {t} records that the workspace does not contain.",
        "rows": "Read each record carefully; the fields are shown in full.",
        "chart": "The chart compares the records side by side.",
        "aclose": "Combine these records with the workspace to answer the question.",
    }
    zh = {
        "intro": "本简报介绍对{t}记录进行分析所依据的规则。",
        "scope": "卡片上显示的是监控的{l}。",
        "others": "这些数值近期复核过，但不在本次范围内。",
        "boundary": "以下是阈值两侧的真实记录。",
        "panel": "配置面板给出了触发字段、比较方向和阈值。",
        "window": "分析只考虑该时间窗口内的记录。",
        "close": "请将该规则应用于工作区中的记录。",
        "aintro": "本简报展示工作区中没有的{t}记录。",
        "rows": "请仔细阅读每条记录，字段均完整列出。",
        "chart": "图表并列比较了这些记录。",
        "aclose": "请结合这些记录与工作区数据回答问题。",
    }
    if language == "zh" and isinstance(kw.get("t"), str):
        kw["t"] = kw["t"].removesuffix("记录")  # "住院记录" + "记录" reads once
    return (zh if language == "zh" else en)[key].format(**kw)


class DeterministicPlanner:
    """Scenes from fixed patterns per strategy (the offline planner)."""

    name = "deterministic"

    def plan(self, evidence: EvidencePlan, *, scene_seconds: float = 3.0) -> Storyboard:
        """Plan the storyboard."""
        lang = evidence.language
        t = _texts(lang)
        d = scene_seconds
        scenes: list[Scene] = []

        def add(kind: str, **kw: Any) -> None:
            scenes.append(make_scene(len(scenes) + 1, evidence, kind, **kw))

        if evidence.strategy == "predicate_abstraction":
            add(
                "title",
                title=f"{evidence.table} · {t['rule']}",
                narration=_narration(lang, "intro", t=evidence.table),
                duration=d * 0.8,
            )
            for p in evidence.predicates:
                recs = [
                    r.record_id
                    for r in evidence.records
                    if r.table == p.table and r.columns[-1] == p.column
                ]
                label = column_label(p.column, lang)
                if p.operator == "=":
                    add(
                        "card",
                        atoms=[p.atom_id],
                        title=t["scope"],
                        narration=_narration(lang, "scope", l=label),
                        duration=d,
                    )
                    if recs:
                        add(
                            "card",
                            records=recs,
                            title=t["others"],
                            narration=_narration(lang, "others"),
                            duration=d,
                        )
                    continue
                if recs:
                    add(
                        "table",
                        records=recs,
                        title=t["boundary"],
                        narration=_narration(lang, "boundary"),
                        duration=d * 1.2,
                    )
                if p.operator == "year":
                    add(
                        "time_window",
                        atoms=[p.atom_id],
                        title=t["window"],
                        narration=_narration(lang, "window"),
                        duration=d,
                    )
                else:
                    add(
                        "config_panel",
                        atoms=[p.atom_id],
                        title=t["rule"],
                        narration=_narration(lang, "panel"),
                        duration=d,
                    )
            add("title", title=t["apply"], narration=_narration(lang, "close"), duration=d * 0.8)
        else:
            add(
                "title",
                title=f"{evidence.table} {t['records']}",
                narration=_narration(lang, "aintro", t=evidence.table),
                duration=d * 0.8,
            )
            ids = [r.record_id for r in evidence.records]
            for i in range(0, len(ids), 3):
                add(
                    "table",
                    records=ids[i : i + 3],
                    title=f"{evidence.table} {t['records']}",
                    narration=_narration(lang, "rows"),
                    duration=d * 1.3,
                )
            with contextlib.suppress(StoryboardRejected):  # no numeric column to chart
                add(
                    "bar_chart",
                    records=ids,
                    title=t["chart"],
                    narration=_narration(lang, "chart"),
                    duration=d,
                )
            add(
                "title", title=t["evidence"], narration=_narration(lang, "aclose"), duration=d * 0.8
            )
        board = Storyboard(
            title=scenes[0].component["title"],
            language=lang,
            strategy=evidence.strategy,
            scenes=tuple(scenes),
            planner=self.name,
        )
        errors = check_storyboard(board, evidence)
        if errors:
            raise StoryboardRejected(errors[0])
        return board


def check_storyboard(board: Storyboard, evidence: EvidencePlan) -> list[str]:
    """Every reason a storyboard cannot carry its evidence (empty: valid)."""
    errors = []
    atoms = {a.atom_id: a for a in evidence.atoms}
    shown: dict[str, str] = {}
    for scene in board.scenes:
        if scene.component.get("type") not in COMPONENTS:
            errors.append(f"{scene.scene_id}: unknown component {scene.component.get('type')!r}")
        if not (0.2 <= scene.duration <= 60):
            errors.append(f"{scene.scene_id}: duration {scene.duration} is not 0.2-60 s")
        for aid, text in scene.constants.items():
            if aid not in atoms:
                errors.append(f"{scene.scene_id}: unknown evidence id {aid!r}")
            elif text != atoms[aid].display:
                errors.append(
                    f"{scene.scene_id}: constant for {aid} is {text!r}, the evidence "
                    f"value is {atoms[aid].display!r}"
                )
            else:
                shown[aid] = text
    for aid in atoms:
        if aid not in shown:
            errors.append(f"evidence {aid} ({atoms[aid].display!r}) is in no scene")
    for p in evidence.predicates:
        if p.operator not in ("=", "year"):
            panel = any(
                s.component.get("type") == "config_panel"
                and p.atom_id in s.constants
                and OPERATOR_TEXT[p.operator] in s.visible_text
                for s in board.scenes
            )
            if not panel:
                errors.append(
                    f"evidence {p.atom_id}: no scene shows both its direction and its cutoff"
                )
    return errors


STORYBOARD_PROMPT = """Design a realistic data-video storyboard that communicates every \
supplied evidence atom without changing its value or analytical role.

RULES
1. Every EVIDENCE_ID must appear in at least one scene and must retain its typed value, \
operator, precision, unit, and entity association.
2. Predicate abstraction must communicate both comparison direction and threshold \
(use a config_panel for a comparison, a time_window for a year, a card for an equality). \
Answer evidence must remain readable but need not be adjacent.
3. Use only supplied records for data-bearing distractors. Do not invent an alternative \
rule or a second valid answer.
4. Narration should support the business scenario; do not read out all evidence when doing \
so would make visual structure unnecessary.
5. Return JSON only. Every visible constant must identify its source atom."""


class LlmPlanner:
    """Storyboards from an OpenAI-compatible chat model, validated and compiled.

    Args:
        client: anything with ``complete(messages)`` returning a reply with ``content``
            (a ``MeteredClient``); built from ``model`` when omitted.
        model: a ``ModelSpec`` to build the client from.
        max_attempts: model attempts before the storyboard is rejected.
    """

    name = "llm"

    def __init__(
        self,
        client: Any | None = None,
        *,
        model: Any | None = None,
        api_key: str | None = None,
        max_attempts: int = 3,
    ) -> None:
        if client is None:
            if model is None:
                raise ConfigError("the llm storyboard planner needs a client or a model")
            from dataspace.llm.client import MeteredClient

            client = MeteredClient(model, api_key=api_key, max_output_tokens=8192)
        self.client = client
        self.max_attempts = max_attempts

    def prompt(self, evidence: EvidencePlan) -> str:
        """The user message: strategy, atoms, records and the component library."""
        return "\n".join(
            [
                f"TASK_STRATEGY: {evidence.strategy}",
                f"EVIDENCE_ATOMS: {json.dumps([a.to_json() for a in evidence.atoms], ensure_ascii=False, default=str)}",  # noqa: E501
                f"SUPPORTING_RECORDS: {json.dumps([r.to_json() for r in evidence.records], ensure_ascii=False)}",  # noqa: E501
                f"VISUAL_COMPONENT_LIBRARY: {list(COMPONENTS)}",
                'OUTPUT: {"scenes": [{"scene_id": "...", "duration_hint": "3s", "evidence_ids": '
                '["..."], "records": ["R1"], "component": "...", "title": "...", '
                '"data_constants": [{"atom_id": "...", "value": "..."}], "visible_text": ["..."], '
                '"narration": "..."}]}',
            ]
        )

    def _compile(self, raw: str, evidence: EvidencePlan, scene_seconds: float) -> Storyboard:
        obj = extract_json(raw)
        if not isinstance(obj.get("scenes"), list):
            raise StoryboardRejected('the reply must be {"scenes": [...]}')
        atoms = {a.atom_id: a for a in evidence.atoms}
        scenes = []
        for n, s in enumerate(obj["scenes"], start=1):
            if not isinstance(s, dict):
                raise StoryboardRejected(f"scene {n} is not an object")
            for c in s.get("data_constants") or []:
                aid, value = str(c.get("atom_id")), str(c.get("value"))
                if aid in atoms and value != atoms[aid].display:
                    raise StoryboardRejected(
                        f"scene {n}: constant for {aid} is {value!r}, the "
                        f"evidence value is {atoms[aid].display!r}"
                    )
            m = re.search(r"\d+(\.\d+)?", str(s.get("duration_hint", "")))
            duration = float(m.group()) if m else scene_seconds
            scene = make_scene(
                n,
                evidence,
                str(s.get("component")),
                atoms=[str(a) for a in s.get("evidence_ids") or []],
                records=[str(r) for r in s.get("records") or []],
                title=str(s.get("title") or ""),
                narration=str(s.get("narration") or ""),
                duration=min(max(duration, 1.0), 30.0),
            )
            scenes.append(scene)
        if not scenes:
            raise StoryboardRejected("the storyboard has no scenes")
        return Storyboard(
            title=str(scenes[0].component.get("title") or evidence.table),
            language=evidence.language,
            strategy=evidence.strategy,
            scenes=tuple(scenes),
            planner=self.name,
        )

    def plan(self, evidence: EvidencePlan, *, scene_seconds: float = 3.0) -> Storyboard:
        """Ask the model, validate, and retry with the errors."""
        messages = [
            {"role": "system", "content": STORYBOARD_PROMPT},
            {"role": "user", "content": self.prompt(evidence)},
        ]

        def attempt(rejections: tuple[Rejection, ...]) -> tuple[Storyboard, str]:
            reply = self.client.complete(retry_messages(messages, rejections, _feedback))
            raw = str(getattr(reply, "content", "") or "")
            try:
                return self._compile(raw, evidence, scene_seconds), raw
            except (StoryboardRejected, TypeError, KeyError, ValueError) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise ReplyError(reason, raw=raw) from exc

        asked = ask(
            attempt,
            lambda board: check_storyboard(board, evidence),
            max_attempts=self.max_attempts,
            what="storyboard",
        )
        rejected = tuple(r.errors[0] for r in asked.rejections)
        if asked.value is None:
            raise StoryboardRejected(
                f"storyboard rejected {self.max_attempts} times: {rejected[-1]}"
            )
        return replace(asked.value, attempts=asked.attempts, rejected=rejected)


def _feedback(errors: Sequence[str]) -> str:
    return (
        "The storyboard was rejected:\n"
        + "\n".join(f"- {e}" for e in errors[:20])
        + "\nReturn the corrected JSON."
    )


PLANNERS: Registry[Any] = Registry(
    "storyboard planner",
    {
        "deterministic": "builder.video.storyboard:DeterministicPlanner",
        "llm": "builder.video.storyboard:LlmPlanner",
    },
    plural="planners",
)
"""Storyboard planners by name (a registered planner may live in any module)."""


def get_planner(name: str, **options: Any) -> StoryboardPlanner:
    """A planner by name (``deterministic`` or ``llm``).

    Raises:
        ConfigError: unknown name.
    """
    planner: StoryboardPlanner = PLANNERS.factory(name)(**options)
    return planner


__all__ = [
    "COMPONENTS",
    "PLANNERS",
    "DeterministicPlanner",
    "LlmPlanner",
    "Scene",
    "Storyboard",
    "StoryboardPlanner",
    "StoryboardRejected",
    "check_storyboard",
    "component_for",
    "component_texts",
    "get_planner",
    "make_scene",
]
