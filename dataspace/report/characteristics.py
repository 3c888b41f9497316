"""Task characteristics for accuracy breakdowns (the paper's Table 12).

Each characteristic classifies one task from its metadata (``metadata/task_N.json``) into
a group, or into ``None`` when the annotation it needs is absent. Metadata is read
defensively: any key may be missing or shaped differently (a list or a mapping of
operations, a string or a list of workspace languages), and the official release carries
none at all. The first group of each characteristic is the reference group for gaps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

DOCUMENT_MODALITIES = frozenset({"pdf", "markdown", "md", "document", "docx", "doc", "txt"})
VIDEO_MODALITIES = frozenset({"video", "mp4", "mov", "webm", "avi", "mkv"})

Classifier = Callable[[Mapping[str, Any]], str | None]


@dataclass(frozen=True, kw_only=True)
class Characteristic:
    """One breakdown dimension.

    Attributes:
        name: the characteristic as the report names it (``Join``).
        groups: its groups in display order; the first is the reference group.
        needs: the metadata key(s) it reads, for notes about missing annotations.
        classify: task metadata -> group, or None when the annotation is absent.
    """

    name: str
    groups: tuple[str, ...]
    needs: str
    classify: Classifier


def _as_list(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [str(k) for k, v in value.items() if v]
    if isinstance(value, Iterable):
        return [str(v) for v in value]
    return None


def _lower(values: list[str] | None) -> set[str] | None:
    return None if values is None else {v.strip().lower() for v in values if str(v).strip()}


def language_setting(md: Mapping[str, Any]) -> str | None:
    """``Single-language`` when question and workspace share one language.

    >>> language_setting({"languages": {"question": "en", "workspace": ["en", "zh"]}})
    'Cross-language'
    >>> language_setting({"languages": {"question": "zh", "workspace": "zh"}})
    'Single-language'
    >>> language_setting({"cross_language": True})
    'Cross-language'
    >>> language_setting({}) is None
    True
    """
    langs = md.get("languages")
    if isinstance(langs, Mapping):
        question, workspace = langs.get("question"), langs.get("workspace")
    else:
        question, workspace = md.get("question_language"), md.get("workspace_language")
    q = _lower(_as_list(question))
    w = _lower(_as_list(workspace))
    if q and w:
        return "Single-language" if q == w and len(q) == 1 else "Cross-language"
    flag = md.get("cross_language")
    if isinstance(flag, bool):
        return "Cross-language" if flag else "Single-language"
    return None


def required_modalities(md: Mapping[str, Any]) -> str | None:
    """``Single-modal`` or ``Multimodal`` by the number of required modalities.

    >>> required_modalities({"modalities_required": ["csv", "pdf"]})
    'Multimodal'
    >>> required_modalities({"modalities_required": ["sqlite"]})
    'Single-modal'
    """
    mods = _lower(_as_list(md.get("modalities_required")))
    if not mods:
        return None
    return "Single-modal" if len(mods) == 1 else "Multimodal"


def _evidence(md: Mapping[str, Any], kinds: frozenset[str]) -> str | None:
    mods = _lower(_as_list(md.get("modalities_required")))
    if not mods:
        return None
    return "Required" if mods & kinds else "Absent"


def document_evidence(md: Mapping[str, Any]) -> str | None:
    """Whether a document (PDF, Markdown) is among the required modalities.

    >>> document_evidence({"modalities_required": ["PDF", "csv"]})
    'Required'
    """
    return _evidence(md, DOCUMENT_MODALITIES)


def video_evidence(md: Mapping[str, Any]) -> str | None:
    """Whether video is among the required modalities.

    >>> video_evidence({"modalities_required": ["csv"]})
    'Absent'
    """
    return _evidence(md, VIDEO_MODALITIES)


def _operation(name: str) -> Classifier:
    def classify(md: Mapping[str, Any]) -> str | None:
        ops = _lower(_as_list(md.get("operations")))
        if ops is None:
            return None
        return "Required" if name in ops else "Absent"

    classify.__name__ = f"operation_{name}"
    return classify


def _one_or_many(key: str) -> Classifier:
    def classify(md: Mapping[str, Any]) -> str | None:
        value = md.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return "One" if value <= 1 else "Multiple"

    classify.__name__ = f"one_or_many_{key}"
    return classify


def row_order(md: Mapping[str, Any]) -> str | None:
    """``Sensitive`` when the answer's row order is evaluated.

    >>> row_order({"order_sensitive": True})
    'Sensitive'
    >>> row_order({"order_sensitive": "yes"}) is None
    True
    """
    value = md.get("order_sensitive")
    if not isinstance(value, bool):
        return None
    return "Sensitive" if value else "Insensitive"


WORKSPACE_SIZE = "Workspace size"
QUARTILES = ("Q1 (smallest)", "Q2", "Q3", "Q4 (largest)")


def _no_group(md: Mapping[str, Any]) -> str | None:
    return None  # quartiles need every task at once: see ``assign_groups``


CHARACTERISTICS: tuple[Characteristic, ...] = (
    Characteristic(
        name="Language",
        groups=("Single-language", "Cross-language"),
        needs="languages",
        classify=language_setting,
    ),
    Characteristic(
        name="Required modalities",
        groups=("Single-modal", "Multimodal"),
        needs="modalities_required",
        classify=required_modalities,
    ),
    Characteristic(
        name="Document evidence",
        groups=("Absent", "Required"),
        needs="modalities_required",
        classify=document_evidence,
    ),
    Characteristic(
        name="Video evidence",
        groups=("Absent", "Required"),
        needs="modalities_required",
        classify=video_evidence,
    ),
    Characteristic(
        name=WORKSPACE_SIZE, groups=QUARTILES, needs="workspace_bytes", classify=_no_group
    ),
    Characteristic(
        name="Join", groups=("Absent", "Required"), needs="operations", classify=_operation("join")
    ),
    Characteristic(
        name="Aggregation",
        groups=("Absent", "Required"),
        needs="operations",
        classify=_operation("aggregation"),
    ),
    Characteristic(
        name="Answer rows",
        groups=("One", "Multiple"),
        needs="answer_rows",
        classify=_one_or_many("answer_rows"),
    ),
    Characteristic(
        name="Answer columns",
        groups=("One", "Multiple"),
        needs="answer_columns",
        classify=_one_or_many("answer_columns"),
    ),
    Characteristic(
        name="Row order",
        groups=("Insensitive", "Sensitive"),
        needs="order_sensitive",
        classify=row_order,
    ),
)


def size_quartiles(sizes: Mapping[str, float]) -> dict[str, str]:
    """Assign tasks to workspace-size quartiles by rank (ties broken by task order).

    Quartiles are as even as the count allows: 410 tasks give 103, 102, 102 and 103.

    >>> q = size_quartiles({f"t{i}": i for i in range(1, 9)})
    >>> [q[f"t{i}"] for i in (1, 3, 6, 8)]
    ['Q1 (smallest)', 'Q2', 'Q3', 'Q4 (largest)']
    """
    ordered = sorted(sizes, key=lambda t: (sizes[t], t))
    n = len(ordered)
    out: dict[str, str] = {}
    for rank, task in enumerate(ordered, start=1):
        # the quartile edges of ranks 1..n sit at 1 + q(n-1)/4, as pandas.qcut puts them
        q = min(3, max(0, -(-4 * (rank - 1) // (n - 1)) - 1)) if n > 1 else 0
        out[task] = QUARTILES[q]
    return out


@dataclass(frozen=True, kw_only=True)
class Grouping:
    """Tasks assigned to the groups of every characteristic.

    Attributes:
        groups: characteristic name -> task id -> group.
        missing: characteristic name -> number of tasks that lack its annotation.
        left_out: characteristics with no annotated task at all (breakdown omitted).
    """

    groups: Mapping[str, Mapping[str, str]]
    missing: Mapping[str, int]
    left_out: tuple[str, ...]


def assign_groups(metadata: Mapping[str, Mapping[str, Any] | None]) -> Grouping:
    """Classify every task (task id -> metadata, possibly empty) by every characteristic."""
    groups: dict[str, dict[str, str]] = {}
    missing: dict[str, int] = {}
    left_out: list[str] = []
    for ch in CHARACTERISTICS:
        assigned: dict[str, str] = {}
        if ch.name == WORKSPACE_SIZE:
            sizes = {}
            for task, md in metadata.items():
                value = (md or {}).get("workspace_bytes")
                if isinstance(value, int | float) and not isinstance(value, bool):
                    sizes[task] = float(value)
            if len(sizes) >= 4:
                assigned = size_quartiles(sizes)
        else:
            for task, md in metadata.items():
                try:
                    group = ch.classify(md or {})
                except Exception:  # malformed annotation: treat as absent, never crash
                    logger.warning("task %s: unreadable %s annotation", task, ch.needs)
                    group = None
                if group is not None:
                    assigned[task] = group
        if not assigned:
            left_out.append(ch.name)
            continue
        groups[ch.name] = assigned
        missing[ch.name] = len(metadata) - len(assigned)
    return Grouping(groups=groups, missing=missing, left_out=tuple(left_out))


__all__ = [
    "CHARACTERISTICS",
    "QUARTILES",
    "Characteristic",
    "Grouping",
    "assign_groups",
    "document_evidence",
    "language_setting",
    "required_modalities",
    "row_order",
    "size_quartiles",
    "video_evidence",
]
