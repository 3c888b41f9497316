"""Scoring one task: from files or from rows in memory, to the official per-task verdict."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from evaluator.config import TaskConfig
from evaluator.csvfile import check_table_shape, read_csv
from evaluator.errors import (
    COLUMN_COUNT_MISMATCH,
    INVALID_PREDICTION_CSV,
    RELATION_MISMATCH,
    ROW_COUNT_MISMATCH,
    TYPE_NORMALIZATION_FAILED,
    CsvError,
)
from evaluator.matching import GoldRelation, align, prepare_gold

logger = logging.getLogger(__name__)

_ERROR_TEXT = {
    TYPE_NORMALIZATION_FAILED: (
        "No one-to-one column mapping is compatible with the configured types"
    ),
}


class ColumnPair(NamedTuple):
    """One gold column and the prediction column matched to it."""

    gold_index: int
    prediction_index: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskVerdict:
    """The verdict on one task, field for field the official per-task entry.

    Attributes:
        task_id: ``task_N``.
        passed: whether the prediction equals the gold relation.
        score: 1 if passed else 0.
        order_sensitive: from the config.
        gold_column_count: gold width.
        prediction_column_count: prediction width (0 when missing or unreadable).
        gold_row_count: gold data rows.
        prediction_row_count: prediction data rows (0 when missing or unreadable).
        column_mapping: the first passing mapping in lexicographic order, or None.
        error_code: None when passed, else one of :data:`evaluator.ERROR_CODES`.
        error: a one-line explanation, or None when passed.
    """

    task_id: str
    passed: bool
    score: int
    order_sensitive: bool
    gold_column_count: int
    prediction_column_count: int
    gold_row_count: int
    prediction_row_count: int
    column_mapping: tuple[ColumnPair, ...] | None
    error_code: str | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """The official per-task JSON object (same keys, same order)."""
        return {
            "task_id": self.task_id,
            "passed": self.passed,
            "score": self.score,
            "order_sensitive": self.order_sensitive,
            "gold_column_count": self.gold_column_count,
            "prediction_column_count": self.prediction_column_count,
            "gold_row_count": self.gold_row_count,
            "prediction_row_count": self.prediction_row_count,
            "column_mapping": None
            if self.column_mapping is None
            else [
                {"gold_index": pair.gold_index, "prediction_index": pair.prediction_index}
                for pair in self.column_mapping
            ],
            "error_code": self.error_code,
            "error": self.error,
        }


def _failed(
    config: TaskConfig,
    gold: GoldRelation,
    *,
    prediction_columns: int,
    prediction_rows: int,
    code: str,
    error: str,
) -> TaskVerdict:
    return TaskVerdict(
        task_id=config.task_id,
        passed=False,
        score=0,
        order_sensitive=config.order_sensitive,
        gold_column_count=len(config.columns),
        prediction_column_count=prediction_columns,
        gold_row_count=gold.row_count,
        prediction_row_count=prediction_rows,
        column_mapping=None,
        error_code=code,
        error=error,
    )


def _judge(
    config: TaskConfig,
    gold: GoldRelation,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
) -> TaskVerdict:
    width = len(config.columns)
    if len(header) != width:
        return _failed(
            config,
            gold,
            prediction_columns=len(header),
            prediction_rows=len(rows),
            code=COLUMN_COUNT_MISMATCH,
            error=f"Expected {width} columns; received {len(header)}",
        )
    if len(rows) != gold.row_count:
        return _failed(
            config,
            gold,
            prediction_columns=len(header),
            prediction_rows=len(rows),
            code=ROW_COUNT_MISMATCH,
            error=f"Expected {gold.row_count} data rows; received {len(rows)}",
        )
    alignment = align(gold, rows, order_sensitive=config.order_sensitive)
    if alignment.mapping is None:
        code = alignment.error_code or RELATION_MISMATCH
        if code == RELATION_MISMATCH:
            kind = "ordered row sequence" if config.order_sensitive else "unordered row multiset"
            error = f"Prediction does not equal the gold {kind}"
        else:
            error = _ERROR_TEXT[code]
        return _failed(
            config,
            gold,
            prediction_columns=len(header),
            prediction_rows=len(rows),
            code=code,
            error=error,
        )
    return TaskVerdict(
        task_id=config.task_id,
        passed=True,
        score=1,
        order_sensitive=config.order_sensitive,
        gold_column_count=width,
        prediction_column_count=len(header),
        gold_row_count=gold.row_count,
        prediction_row_count=len(rows),
        column_mapping=tuple(ColumnPair(j, p) for j, p in enumerate(alignment.mapping)),
        error_code=None,
        error=None,
    )


def evaluate_task(
    *,
    prediction_path: str | Path,
    gold_path: str | Path,
    config: TaskConfig,
    task_id: str | None = None,
) -> TaskVerdict:
    """Score one prediction file against its gold file.

    Args:
        prediction_path: ``task_N/prediction.csv`` (need not exist; a symlink is rejected).
        gold_path: ``task_N/gold.csv``.
        config: the task's config.
        task_id: if given, must equal ``config.task_id``.

    Returns:
        The verdict; every prediction problem is a failed verdict with its error code.

    Raises:
        FatalError: the gold is unreadable or does not fit the config.
        ValueError: ``task_id`` differs from the config's.
    """
    if task_id is not None and task_id != config.task_id:
        raise ValueError(f"task_id {task_id!r} does not match the config's {config.task_id!r}")
    gold_table = read_csv(gold_path, role="gold")
    gold = prepare_gold(gold_table.header, gold_table.rows, config, source=str(gold_path))
    try:
        prediction = read_csv(prediction_path, role="prediction")
    except CsvError as exc:
        return _failed(
            config, gold, prediction_columns=0, prediction_rows=0, code=exc.code, error=str(exc)
        )
    return _judge(config, gold, prediction.header, prediction.rows)


def evaluate_rows(
    *,
    gold_header: Sequence[str],
    gold_rows: Sequence[Sequence[str]],
    prediction_header: Sequence[str],
    prediction_rows: Sequence[Sequence[str]],
    config: TaskConfig,
) -> TaskVerdict:
    """Score rows already in memory (raw strings, as a CSV reader returns them).

    The prediction must obey the reader's shape rules (non-empty header, at most 64
    columns and 100,000 rows, rectangular, no NUL); otherwise the verdict is
    ``invalid_prediction_csv``.

    Raises:
        FatalError: the gold rows break those rules or do not fit the config.
    """
    gold_header_t = tuple(gold_header)
    gold_rows_t = tuple(tuple(row) for row in gold_rows)
    check_table_shape(gold_header_t, gold_rows_t, label="<gold rows>", role="gold")
    gold = prepare_gold(gold_header_t, gold_rows_t, config, source="<gold rows>")
    header_t = tuple(prediction_header)
    rows_t = tuple(tuple(row) for row in prediction_rows)
    try:
        check_table_shape(header_t, rows_t, label="<prediction rows>", role="prediction")
    except CsvError as exc:
        return _failed(
            config,
            gold,
            prediction_columns=0,
            prediction_rows=0,
            code=INVALID_PREDICTION_CSV,
            error=str(exc),
        )
    return _judge(config, gold, header_t, rows_t)


__all__ = ["ColumnPair", "TaskVerdict", "evaluate_rows", "evaluate_task"]
