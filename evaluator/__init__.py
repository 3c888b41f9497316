"""The DataSpace evaluator: Task Accuracy, verdict for verdict as the official one.

Standard library only and independent of the rest of the project, so the folder can be
copied anywhere. ``python -m evaluator`` is a drop-in for the official ``evaluate.py``
command line; the library API scores one task (from files or rows), or a whole folder.

How a prediction is scored:

1. The gold and the prediction are read by one strict CSV reader (:func:`read_csv`).
   Problems with the gold or the config are fatal (:class:`FatalError`); problems with the
   prediction fail only its task, with an error code.
2. Every gold cell is canonicalized under its column's rule (text, number, date, datetime,
   boolean; NULL shared by all types) and interned as a small integer per column.
3. Prediction columns are matched to gold columns without enumerating permutations. A
   raw string is canonicalized at most once per rule, lazily. A pair (gold ``j``,
   prediction ``p``) is a *candidate* only if ``p`` canonicalized under ``j``'s rule has
   the same multiset of values as gold ``j`` (the same sequence when row order matters).
   A depth-first search assigns gold columns 0, 1, ... to candidate columns in increasing
   order, continuing only while the remaining columns still admit a one-to-one matching
   of candidates and, for unordered tasks, while the multiset of partial rows (each row
   labelled by its canonical prefix) equals the gold's. Columns with identical content
   are tried once per search node. The first complete mapping is therefore the first
   passing mapping in lexicographic order, which is what the official evaluator reports.
4. With no passing mapping the code is ``type_normalization_failed`` when no one-to-one
   mapping has every prediction column fully canonicalizable under its gold column (a
   bipartite perfect-matching test), else ``relation_mismatch``.
"""

from evaluator.canonical import NULL, CellError, canonicalize
from evaluator.config import (
    CONFIG_SCHEMA_VERSION,
    ColumnSpec,
    TaskConfig,
    canonical_config_json,
    config_set_sha256,
    load_config,
    load_configs,
    parse_config,
)
from evaluator.csvfile import (
    MAX_CELL_CHARACTERS,
    MAX_CSV_BYTES,
    MAX_CSV_COLUMNS,
    MAX_CSV_ROWS,
    CsvTable,
    read_csv,
)
from evaluator.errors import ERROR_CODES, CsvError, FatalError
from evaluator.explain import explain, explain_files
from evaluator.suite import EVALUATOR_NAME, EVALUATOR_VERSION, evaluate_suite
from evaluator.task import ColumnPair, TaskVerdict, evaluate_rows, evaluate_task

__all__ = [
    "CONFIG_SCHEMA_VERSION",
    "ERROR_CODES",
    "EVALUATOR_NAME",
    "EVALUATOR_VERSION",
    "MAX_CELL_CHARACTERS",
    "MAX_CSV_BYTES",
    "MAX_CSV_COLUMNS",
    "MAX_CSV_ROWS",
    "NULL",
    "CellError",
    "ColumnPair",
    "ColumnSpec",
    "CsvError",
    "CsvTable",
    "FatalError",
    "TaskConfig",
    "TaskVerdict",
    "canonical_config_json",
    "canonicalize",
    "config_set_sha256",
    "evaluate_rows",
    "evaluate_suite",
    "evaluate_task",
    "explain",
    "explain_files",
    "load_config",
    "load_configs",
    "parse_config",
    "read_csv",
]
