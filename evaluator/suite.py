"""Scoring a whole prediction folder: the official ``evaluation_summary.json``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from evaluator.config import (
    CONFIG_SCHEMA_VERSION,
    TASK_ID_PATTERN,
    config_set_sha256,
    load_configs,
    task_number,
)
from evaluator.errors import FatalError
from evaluator.task import evaluate_task

logger = logging.getLogger(__name__)

EVALUATOR_NAME = "DataSpace Evaluator"
EVALUATOR_VERSION = "1.0.0"
METRIC = "task_accuracy"


def unscored_prediction_tasks(prediction_root: Path, evaluated: set[str]) -> list[str]:
    """``task_N`` folders of the prediction root that have no config, in task order."""
    found = [
        path.name
        for path in prediction_root.iterdir()
        if path.is_dir() and TASK_ID_PATTERN.fullmatch(path.name) and path.name not in evaluated
    ]
    return sorted(found, key=task_number)


def evaluate_suite(
    *,
    prediction_root: str | Path,
    gold_root: str | Path,
    config_root: str | Path,
) -> dict[str, Any]:
    """Score every task that has a config; the official summary, key for key.

    Args:
        prediction_root: holds ``task_N/prediction.csv``.
        gold_root: holds ``task_N/gold.csv``.
        config_root: holds ``task_N.json``; exactly these tasks are scored.

    Returns:
        The summary dict (``tasks`` holds one official per-task entry per config).

    Raises:
        FatalError: a missing root folder, no configs, a bad config or a bad gold file.
    """
    prediction_root = Path(prediction_root)
    gold_root = Path(gold_root)
    config_root = Path(config_root)
    if not prediction_root.is_dir():
        raise FatalError(f"Missing prediction root directory: {prediction_root}")
    if not gold_root.is_dir():
        raise FatalError(f"Missing gold root directory: {gold_root}")
    configs = load_configs(config_root)
    verdicts = []
    for config in configs:
        verdict = evaluate_task(
            prediction_path=prediction_root / config.task_id / "prediction.csv",
            gold_path=gold_root / config.task_id / "gold.csv",
            config=config,
        )
        logger.debug("%s: %s", config.task_id, verdict.error_code or "passed")
        verdicts.append(verdict)
    passed = sum(verdict.passed for verdict in verdicts)
    count = len(verdicts)
    return {
        "evaluator": EVALUATOR_NAME,
        "evaluator_version": EVALUATOR_VERSION,
        "config_schema_version": CONFIG_SCHEMA_VERSION,
        "config_set_sha256": config_set_sha256(config_root),
        "metric": METRIC,
        "task_count": count,
        "passed_task_count": passed,
        "failed_task_count": count - passed,
        "task_accuracy": passed / count if count else 0.0,
        "unscored_prediction_tasks": unscored_prediction_tasks(
            prediction_root, {config.task_id for config in configs}
        ),
        "tasks": [verdict.to_dict() for verdict in verdicts],
    }


__all__ = [
    "EVALUATOR_NAME",
    "EVALUATOR_VERSION",
    "METRIC",
    "evaluate_suite",
    "unscored_prediction_tasks",
]
