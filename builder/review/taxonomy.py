"""The fixed vocabularies of expert review (paper §4.4, Appendix A.5, Table 7).

Every value a reviewer may pick is listed here once; the server validates against these
sets and the console reads them from ``/api/vocabulary``.
"""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """Separate roles: reviewers solve and verify, repairers version, administrators decide."""

    REVIEWER = "reviewer"
    REPAIRER = "repairer"
    ADMIN = "admin"


class Verdict(StrEnum):
    """The phase-2 gold verdict."""

    MATCH = "match"
    MISMATCH = "mismatch"
    UNSURE = "unsure"


class Disposition(StrEnum):
    """The phase-2 release disposition."""

    PASS = "pass"
    REPAIR_QUESTION = "repair_question"
    REPAIR_WORKSPACE = "repair_workspace"
    REPAIR_GOLD = "repair_gold"
    REPAIR_CONFIG = "repair_config"
    REPAIR_SEVERAL = "repair_several"
    REMOVE = "remove"


class TaskState(StrEnum):
    """Where a task stands in review."""

    PENDING = "pending"  # loaded, fewer than two reviewers assigned
    IN_REVIEW = "in_review"  # reviewers are solving / verifying the current version
    CONSENSUS = "consensus"  # every assigned reviewer matched, passed, same config
    ADJUDICATION = "adjudication"  # all locked, no consensus: discussion, then repair
    RECHECK = "recheck"  # a repaired version awaits the same reviewers' verification
    ACCEPTED = "accepted"  # final: the administrator accepted the consensus version
    REMOVED = "removed"  # final: removed with a reason


FINAL_STATES = frozenset({TaskState.ACCEPTED, TaskState.REMOVED})

ANCHOR_KINDS = ("row", "key", "section", "page", "timestamp")
EVIDENCE_ROLES = ("filter", "join", "projection", "aggregation", "ordering", "unit")
REPAIR_SCOPES = ("question", "workspace", "gold", "config")
SEMANTICS_FIELDS = (
    "grain",
    "predicates",
    "aggregation",
    "ordering",
    "units",
    "nulls",
    "duplicates",
)
MIN_REVIEWERS = 2

# Table 7: category -> flags. A flag is written ``category.flag``.
ISSUE_TAXONOMY: dict[str, tuple[str, ...]] = {
    "access": ("parsing_failure", "missing_evidence", "conflicting_evidence"),
    "question": (
        "ambiguous_grain",
        "ambiguous_filter",
        "ambiguous_join",
        "ambiguous_unit",
        "ambiguous_time_scope",
        "ambiguous_ordering",
        "ambiguous_null_handling",
        "ambiguous_duplicate_handling",
    ),
    "reference": (
        "question_gold_mismatch",
        "value_error",
        "shape_error",
        "order_error",
    ),
    "artifact": (
        "document_fact_error",
        "video_fact_error",
        "video_leakage",
        "video_not_necessary",
        "translation_drift",
        "cross_modal_inconsistency",
    ),
    "evaluation": (
        "column_type",
        "precision",
        "unit",
        "percentage_convention",
        "ordering_flag",
    ),
    "release": ("privacy_or_licensing", "near_duplicate", "unsolvable"),
}

ISSUE_FLAGS = frozenset(f"{cat}.{flag}" for cat, flags in ISSUE_TAXONOMY.items() for flag in flags)

# Workspace file suffix -> modality (the six modalities of the benchmark).
MODALITY_BY_SUFFIX = {
    ".csv": "csv",
    ".json": "json",
    ".sqlite": "sqlite",
    ".db": "sqlite",
    ".sqlite3": "sqlite",
    ".md": "markdown",
    ".pdf": "pdf",
    ".mp4": "video",
    ".webm": "video",
}


def modality_of(path: str) -> str:
    """The modality of a workspace path, from its suffix (``other`` when unknown).

    >>> modality_of("reports/q3.PDF")
    'pdf'
    """
    dot = path.rfind(".")
    return MODALITY_BY_SUFFIX.get(path[dot:].lower(), "other") if dot >= 0 else "other"


def vocabulary() -> dict[str, object]:
    """Every fixed vocabulary, for the console."""
    return {
        "verdicts": [v.value for v in Verdict],
        "dispositions": [d.value for d in Disposition],
        "anchor_kinds": list(ANCHOR_KINDS),
        "evidence_roles": list(EVIDENCE_ROLES),
        "repair_scopes": list(REPAIR_SCOPES),
        "semantics_fields": list(SEMANTICS_FIELDS),
        "issue_taxonomy": {k: list(v) for k, v in ISSUE_TAXONOMY.items()},
        "modalities": sorted(set(MODALITY_BY_SUFFIX.values())),
    }


__all__ = [
    "ANCHOR_KINDS",
    "EVIDENCE_ROLES",
    "FINAL_STATES",
    "ISSUE_FLAGS",
    "ISSUE_TAXONOMY",
    "MIN_REVIEWERS",
    "MODALITY_BY_SUFFIX",
    "REPAIR_SCOPES",
    "SEMANTICS_FIELDS",
    "Disposition",
    "Role",
    "TaskState",
    "Verdict",
    "modality_of",
    "vocabulary",
]
