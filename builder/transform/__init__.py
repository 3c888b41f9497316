"""Stage 1: cross-language transformation of (database, question, SQL) with a replacement map."""

from builder.transform.database import (
    DatabaseTranslationError,
    TranslatedDatabase,
    UnitOptions,
    translate_database,
)
from builder.transform.gates import execution_equivalent, nondeterminism
from builder.transform.mapping import ReplacementMap, check_map, identity_map
from builder.transform.migrate import MigrationError, migrate
from builder.transform.sqlrewrite import RewriteResult, rewrite_sql
from builder.transform.transform import (
    LANGUAGES,
    TransformOptions,
    TransformResult,
    transform,
)
from builder.transform.units import extract_units

__all__ = [
    "LANGUAGES",
    "DatabaseTranslationError",
    "MigrationError",
    "ReplacementMap",
    "RewriteResult",
    "TransformOptions",
    "TransformResult",
    "TranslatedDatabase",
    "UnitOptions",
    "check_map",
    "execution_equivalent",
    "extract_units",
    "identity_map",
    "migrate",
    "nondeterminism",
    "rewrite_sql",
    "transform",
    "translate_database",
]
