"""The root-cause taxonomy of the trace-level failure audit (paper §6.5, Table 13, Figure 7).

One primary cause per failed attempt: the earliest observable divergence that conflicts
with the verified solution, stays uncorrected, and determines the submitted result or
prevents submission. Evaluator outcomes (a column-count mismatch, a missing prediction)
are symptoms, kept apart from the cause.

Definitions are the paper's (Table 13) except for C4, C5 and T2, which the paper names in
its taxonomy but does not define (none of its audited failures had them); their wording
here is ours and marked ``paper_defined=False``.
"""

from __future__ import annotations

from dataclasses import dataclass

STAGES: dict[str, str] = {
    "Q": "task intent",
    "D": "discovery",
    "E": "extraction",
    "G": "grounding",
    "C": "computation",
    "M": "materialization",
    "T": "termination",
}


@dataclass(frozen=True, kw_only=True)
class Subtype:
    """One root-cause subtype."""

    code: str
    definition: str
    paper_defined: bool = True

    @property
    def stage(self) -> str:
        """The stage letter (``Q`` ... ``T``)."""
        return self.code[0]


_TABLE_13: tuple[tuple[str, str, bool], ...] = (
    (
        "Q1",
        "Target output, requested entities, or row granularity is misunderstood.",
        True,
    ),
    (
        "Q2",
        "A condition, comparison, temporal scope, or target population is misunderstood.",
        True,
    ),
    (
        "Q3",
        "An ordering or answer constraint is misunderstood.",
        True,
    ),
    (
        "D2",
        "The wrong artifact or source is selected as authoritative evidence.",
        True,
    ),
    (
        "E1",
        "A read, retrieval window, page, frame, or query omits required records.",
        True,
    ),
    (
        "E2",
        "The representation of the correct artifact is parsed incorrectly.",
        True,
    ),
    (
        "E3",
        "Document, image, or video evidence is transcribed incorrectly.",
        True,
    ),
    (
        "G1",
        "A field or schema element is assigned the wrong meaning.",
        True,
    ),
    (
        "G2",
        "Entities, identifiers, join keys, or records are aligned incorrectly.",
        True,
    ),
    (
        "G3",
        "A correctly read value is normalized with the wrong unit, date, language, or scale.",
        True,
    ),
    (
        "G4",
        "Conflicting sources or versions are reconciled incorrectly.",
        True,
    ),
    (
        "C1",
        "Filtering, Boolean, or NULL logic is applied incorrectly.",
        True,
    ),
    (
        "C2",
        "A join, set operation, or deduplication step is incorrect.",
        True,
    ),
    (
        "C3",
        "Aggregation, grouping, windowing, or ranking is incorrect.",
        True,
    ),
    (
        "C4",
        "Arithmetic, rounding, or a derived numeric or date value is computed incorrectly.",
        False,
    ),
    (
        "C5",
        "Sorting, limiting, or top-k selection inside the computation is incorrect.",
        False,
    ),
    (
        "C6",
        "A corrected intermediate result is not propagated through a multi-step computation.",
        True,
    ),
    (
        "M1",
        "A correct internal result is submitted with extra or missing columns.",
        True,
    ),
    (
        "M2",
        "A correct internal result is submitted with extra or missing rows.",
        True,
    ),
    (
        "M3",
        "Type, numeric precision, date precision, or value formatting is altered during output.",
        True,
    ),
    (
        "M4",
        "The correct rows are serialized in an incorrect required order.",
        True,
    ),
    (
        "T1",
        "Unproductive iteration exhausts the action budget without an earlier "
        "persistent analytical error.",
        True,
    ),
    (
        "T2",
        "A tool or runtime error ends the attempt without an earlier persistent analytical error.",
        False,
    ),
    (
        "T3",
        "The agent terminates or fails to submit after obtaining the answer.",
        True,
    ),
)
SUBTYPES: tuple[Subtype, ...] = tuple(
    Subtype(code=c, definition=d, paper_defined=p) for c, d, p in _TABLE_13
)

SUBTYPE_BY_CODE = {s.code: s for s in SUBTYPES}

# Figure 7's symptom columns: the evaluator's outcome of a failed attempt.
SYMPTOMS = (
    "column_count_mismatch",
    "row_count_mismatch",
    "relation_mismatch",
    "type_normalization_failed",
    "invalid_prediction",
    "no_submission",
)


def symptom_of(status: str | None, error_code: str | None) -> str:
    """The Figure-7 symptom of a failed attempt from its result status and error code.

    >>> symptom_of("submitted", "column_count_mismatch")
    'column_count_mismatch'
    >>> symptom_of("no_submission", "missing_prediction")
    'no_submission'
    """
    if error_code in SYMPTOMS:
        return str(error_code)
    if error_code in ("missing_prediction", None) or (status or "") != "submitted":
        return "no_submission"
    return "invalid_prediction"


__all__ = ["STAGES", "SUBTYPES", "SUBTYPE_BY_CODE", "SYMPTOMS", "Subtype", "symptom_of"]
