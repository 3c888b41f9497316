"""Stage 2: constraint-aware relational sampling of one task database per query."""

from builder.sampling.materialize import ForeignKeyReport, foreign_key_report, materialize
from builder.sampling.policy import Relationship, SamplingPolicy
from builder.sampling.safeguards import Safeguards, extract_safeguards
from builder.sampling.sample import SampleResult, result_sha256, sample

__all__ = [
    "ForeignKeyReport",
    "Relationship",
    "Safeguards",
    "SampleResult",
    "SamplingPolicy",
    "extract_safeguards",
    "foreign_key_report",
    "materialize",
    "result_sha256",
    "sample",
]
