"""The evaluator's two error kinds.

::

    Exception
    ├── FatalError     a config, gold file or root folder is unusable: the whole run stops
    └── CsvError       a prediction CSV is unusable: only that task fails, with ``code``

The evaluator never raises on a bad answer once the prediction is readable: it returns a
verdict with an error code. ``CsvError`` only escapes from :func:`evaluator.read_csv`, for
callers that validate a submitted answer before scoring it.

The package stays importable on its own, so these do not derive from the project's error
tree.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

MISSING_PREDICTION = "missing_prediction"
INVALID_PREDICTION_CSV = "invalid_prediction_csv"
COLUMN_COUNT_MISMATCH = "column_count_mismatch"
ROW_COUNT_MISMATCH = "row_count_mismatch"
TYPE_NORMALIZATION_FAILED = "type_normalization_failed"
RELATION_MISMATCH = "relation_mismatch"

ERROR_CODES = (
    MISSING_PREDICTION,
    INVALID_PREDICTION_CSV,
    COLUMN_COUNT_MISMATCH,
    ROW_COUNT_MISMATCH,
    TYPE_NORMALIZATION_FAILED,
    RELATION_MISMATCH,
)


class FatalError(Exception):
    """A config, gold file or root folder problem that aborts the evaluation.

    ``str(error)`` is one line naming the file and the problem; the command line prints it
    after ``Evaluator fatal error:`` and exits 2.
    """


class CsvError(Exception):
    """A prediction CSV that cannot be scored; fails only its task.

    Args:
        code: the verdict's error code, ``missing_prediction`` or ``invalid_prediction_csv``.
        message: one line naming the file and the problem (the verdict's ``error``).
    """

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


__all__ = [
    "COLUMN_COUNT_MISMATCH",
    "ERROR_CODES",
    "INVALID_PREDICTION_CSV",
    "MISSING_PREDICTION",
    "RELATION_MISMATCH",
    "ROW_COUNT_MISMATCH",
    "TYPE_NORMALIZATION_FAILED",
    "CsvError",
    "FatalError",
]
