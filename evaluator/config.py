"""Task configs (schema version 1.0): parsing, validation, listing and hashing.

A config names each gold column's type and, for numbers, how values are compared. Anything
the official evaluator rejects is a :class:`~evaluator.errors.FatalError` here too, with the
same message; inputs on which it would crash instead (a JSON array at the top level, an
unhashable type name, a config file named ``task_x.json``) are fatal errors as well.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.errors import FatalError

logger = logging.getLogger(__name__)

CONFIG_SCHEMA_VERSION = "1.0"
COLUMN_TYPES = ("text", "number", "date", "datetime", "boolean")
COMPARISON_MODES = ("integer", "decimal_places", "significant_digits")
NUMBER_UNITS = ("plain", "percentage_points", "fraction")
MAX_COMPARISON_DIGITS = 30

# Deliberately the same pattern as the official evaluator: ``\d`` also matches non-ASCII
# digits, and ``task_0`` / ``task_01`` are accepted.
TASK_ID_PATTERN = re.compile(r"^task_(\d+)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class ColumnSpec:
    """How one gold column is canonicalized.

    Attributes:
        gold_index: position of the column in the gold CSV (0-based).
        gold_name: the gold header (informational only: headers are never scored).
        type: one of ``text number date datetime boolean``.
        comparison_mode: numbers only: ``integer``, ``decimal_places`` or
            ``significant_digits``.
        comparison_digits: numbers only, for the two rounding modes: 0..30.
        allow_percent_sign: numbers only: whether a trailing ``%`` is accepted.
        unit: numbers only: ``plain``, ``percentage_points`` or ``fraction``.
    """

    gold_index: int
    gold_name: str
    type: str
    comparison_mode: str | None = None
    comparison_digits: int | None = None
    allow_percent_sign: bool = False
    unit: str = "plain"

    @property
    def rule(self) -> tuple[Any, ...]:
        """The canonicalization rule: two columns with equal rules canonicalize alike."""
        if self.type != "number":
            return (self.type,)
        return (
            "number",
            self.comparison_mode,
            self.comparison_digits,
            self.allow_percent_sign,
            self.unit,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskConfig:
    """One task's evaluation config.

    Attributes:
        task_id: ``task_N``.
        order_sensitive: compare rows as a sequence (True) or as a multiset (False).
        columns: one spec per gold column, in gold order.
    """

    task_id: str
    order_sensitive: bool
    columns: tuple[ColumnSpec, ...]


def task_number(task_id: str) -> int:
    """The number in ``task_N``; raises ValueError for anything else.

    >>> task_number("task_12")
    12
    """
    match = TASK_ID_PATTERN.fullmatch(task_id)
    if not match:
        raise ValueError(f"invalid task id {task_id!r}: expected task_N")
    return int(match.group(1))


def _one_of(value: object, choices: Iterable[str]) -> bool:
    # ``value in set`` raises TypeError for unhashable values; a plain comparison does not.
    return isinstance(value, str) and value in choices


def parse_config(obj: object, *, source: str, file_name: str | None = None) -> TaskConfig:
    """Validate a decoded config object.

    Args:
        obj: the decoded JSON.
        source: how error messages name the config (usually its path).
        file_name: the config's file name; when given, its stem must equal ``task_id``.

    Returns:
        The parsed config.

    Raises:
        FatalError: naming ``source`` and the first problem found (the official order).
    """
    if not isinstance(obj, dict):
        raise FatalError(f"Invalid task config {source}: the top level must be a JSON object")
    raw: dict[str, Any] = obj
    if raw.get("schema_version") != CONFIG_SCHEMA_VERSION:
        raise FatalError(f"Unsupported config schema in {source}: {raw.get('schema_version')!r}")
    task_id = raw.get("task_id")
    if not isinstance(task_id, str) or not TASK_ID_PATTERN.fullmatch(task_id):
        raise FatalError(f"Invalid task_id in {source}: {task_id!r}")
    if file_name is not None and Path(file_name).stem != task_id:
        raise FatalError(f"Config filename/task_id mismatch: {file_name} vs {task_id}")
    order_sensitive = raw.get("order_sensitive")
    if not isinstance(order_sensitive, bool):
        raise FatalError(f"Invalid order_sensitive in {source}")
    raw_columns = raw.get("columns")
    if not isinstance(raw_columns, list) or not raw_columns:
        raise FatalError(f"Config has no columns: {source}")
    columns = tuple(
        _parse_column(raw_column, index, source) for index, raw_column in enumerate(raw_columns)
    )
    return TaskConfig(task_id=task_id, order_sensitive=order_sensitive, columns=columns)


def _parse_column(raw: object, index: int, source: str) -> ColumnSpec:
    if not isinstance(raw, dict):
        raise FatalError(f"Invalid column config in {source}")
    # ``!=`` on purpose: the official evaluator accepts 1.0 or true where 1 is expected.
    if raw.get("gold_index") != index:
        raise FatalError(f"gold_index must be contiguous in {source}: expected {index}")
    gold_name = raw.get("gold_name")
    column_type = raw.get("type")
    if not isinstance(gold_name, str):
        raise FatalError(f"Invalid gold_name in {source}")
    if not _one_of(column_type, COLUMN_TYPES):
        raise FatalError(f"Unsupported column type in {source}: {column_type!r}")
    if column_type != "number":
        return ColumnSpec(gold_index=index, gold_name=gold_name, type=str(column_type))

    comparison = raw.get("comparison")
    if not isinstance(comparison, dict):
        raise FatalError(f"Numeric column lacks comparison config in {source}")
    mode = comparison.get("mode")
    if not _one_of(mode, COMPARISON_MODES):
        raise FatalError(f"Invalid numeric comparison mode in {source}: {mode!r}")
    digits: int | None = None
    if mode != "integer":
        raw_digits = comparison.get("digits")
        # bool is an int in Python, and the official check lets true/false through.
        if not isinstance(raw_digits, int) or raw_digits < 0 or raw_digits > MAX_COMPARISON_DIGITS:
            raise FatalError(f"Invalid numeric comparison digits in {source}")
        digits = int(raw_digits)
    unit = raw.get("unit", "plain")
    if not _one_of(unit, NUMBER_UNITS):
        raise FatalError(f"Invalid numeric unit in {source}: {unit!r}")
    return ColumnSpec(
        gold_index=index,
        gold_name=gold_name,
        type="number",
        comparison_mode=str(mode),
        comparison_digits=digits,
        allow_percent_sign=bool(raw.get("allow_percent_sign", False)),
        unit=str(unit),
    )


def load_config(path: str | Path) -> TaskConfig:
    """Read and validate ``task_N.json``; its file name must match its ``task_id``.

    Raises:
        FatalError: the file cannot be read or decoded, or the config is invalid.
    """
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FatalError(f"Cannot load task config {path}: {exc}") from exc
    return parse_config(raw, source=str(path), file_name=path.name)


def config_paths(config_root: Path) -> list[Path]:
    """The ``task_*.json`` files of a config folder, in task-number order.

    Raises:
        FatalError: a file matches ``task_*.json`` but is not named ``task_N.json``.
    """
    paths = list(config_root.glob("task_*.json"))
    for path in paths:
        if not TASK_ID_PATTERN.fullmatch(path.stem):
            raise FatalError(f"Invalid config file name {path}: expected task_N.json")
    return sorted(paths, key=lambda path: task_number(path.stem))


def load_configs(config_root: str | Path) -> list[TaskConfig]:
    """Every config of a folder, in task-number order.

    Raises:
        FatalError: missing folder, no configs, an invalid config or duplicate task ids.
    """
    config_root = Path(config_root)
    if not config_root.is_dir():
        raise FatalError(f"Missing config directory: {config_root}")
    paths = config_paths(config_root)
    if not paths:
        raise FatalError(f"No task configs found under {config_root}")
    configs = [load_config(path) for path in paths]
    if len({config.task_id for config in configs}) != len(configs):
        raise FatalError(f"Duplicate task_id values in evaluator configs under {config_root}")
    return configs


def config_set_sha256(config_root: str | Path) -> str:
    """SHA-256 over the config files: for each, its name, NUL, its bytes, NUL."""
    digest = hashlib.sha256()
    for path in config_paths(Path(config_root)):
        digest.update(path.name.encode("utf-8"))
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def config_to_dict(config: TaskConfig) -> dict[str, Any]:
    """The config as a schema-1.0 JSON object (only the fields that matter)."""
    columns: list[dict[str, Any]] = []
    for column in config.columns:
        entry: dict[str, Any] = {
            "gold_index": column.gold_index,
            "gold_name": column.gold_name,
            "type": column.type,
        }
        if column.type == "number":
            comparison: dict[str, Any] = {"mode": column.comparison_mode}
            if column.comparison_mode != "integer":
                comparison["digits"] = column.comparison_digits
            entry["comparison"] = comparison
            entry["unit"] = column.unit
            entry["allow_percent_sign"] = column.allow_percent_sign
        columns.append(entry)
    return {
        "schema_version": CONFIG_SCHEMA_VERSION,
        "task_id": config.task_id,
        "order_sensitive": config.order_sensitive,
        "columns": columns,
    }


def canonical_config_json(config: TaskConfig) -> str:
    """A canonical JSON text of a config: equal texts mean the configs score alike.

    >>> cfg = parse_config({"schema_version": "1.0", "task_id": "task_1",
    ...     "order_sensitive": False, "columns": [{"gold_index": 0, "gold_name": "n",
    ...     "type": "number", "comparison": {"mode": "integer"}}]}, source="task_1.json")
    >>> canonical_config_json(cfg)[:60]
    '{"columns":[{"allow_percent_sign":false,"comparison":{"mode"'
    """
    return json.dumps(
        config_to_dict(config), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


__all__ = [
    "COLUMN_TYPES",
    "CONFIG_SCHEMA_VERSION",
    "TASK_ID_PATTERN",
    "ColumnSpec",
    "TaskConfig",
    "canonical_config_json",
    "config_paths",
    "config_set_sha256",
    "config_to_dict",
    "load_config",
    "load_configs",
    "parse_config",
    "task_number",
]
