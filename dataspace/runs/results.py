"""The results table: one row per attempt, a fixed schema, stored as Parquet.

Nested records (the evaluator's verdict, the task's metadata) are kept as JSON strings so
that the schema never depends on what a release annotates.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

RESULTS_SCHEMA_VERSION = "1.0"
PHASES = ("queue", "staging", "sandbox_start", "agent", "collect", "evaluation", "upload")

# (column, arrow type name); order is the file's column order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "string"),
    ("key", "string"),
    ("agent", "string"),
    ("harness", "string"),
    ("model", "string"),
    ("task_id", "string"),
    ("attempt", "int64"),
    ("status", "string"),
    ("scored", "bool"),  # false: the task has no gold (unscored), so passed is null
    ("passed", "bool"),
    ("error_code", "string"),
    ("error", "string"),
    ("infra_retries", "int64"),
    ("input_tokens", "int64"),
    ("cached_input_tokens", "int64"),
    ("output_tokens", "int64"),
    ("reasoning_tokens", "int64"),
    ("cost_usd", "float64"),
    ("model_turns", "int64"),
    ("tool_actions", "int64"),
    ("model_calls", "int64"),
    ("model_seconds", "float64"),
    ("model_retries", "int64"),
    ("model_retry_seconds", "float64"),
    ("model_queue_seconds", "float64"),
    ("wall_seconds", "float64"),
    ("working_seconds", "float64"),
    *((f"phase_{p}_seconds", "float64") for p in PHASES),
    ("sandbox_enforcement", "string"),
    ("verdict", "json"),
    ("task_metadata", "json"),
)


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {
        "string": pa.string(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
        "float64": pa.float64(),
        "json": pa.string(),
    }
    return pa.schema(
        [(name, types[t]) for name, t in COLUMNS],
        metadata={b"dataspace.results.schema_version": RESULTS_SCHEMA_VERSION.encode()},
    )


def normalize_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Coerce one results row to the fixed columns (missing values become null).

    >>> normalize_row({"agent": "gold", "passed": True})["passed"]
    True
    """
    out: dict[str, Any] = {}
    for name, t in COLUMNS:
        v = row.get(name)
        if t == "json":
            out[name] = None if v is None else json.dumps(v, ensure_ascii=False, sort_keys=True)
        elif v is None:
            out[name] = None
        elif t == "int64":
            out[name] = int(v)
        elif t == "float64":
            out[name] = float(v)
        elif t == "bool":
            out[name] = bool(v)
        else:
            out[name] = str(v)
    return out


def rows_to_parquet(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """Serialize rows to Parquet bytes with the fixed schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    norm = [normalize_row(r) for r in rows]
    table = pa.Table.from_pylist(norm, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def read_results(data: bytes) -> Any:
    """Parquet bytes -> pandas DataFrame with ``verdict`` and ``task_metadata`` decoded."""
    import pyarrow.parquet as pq

    df = pq.read_table(io.BytesIO(data)).to_pandas()
    for col in ("verdict", "task_metadata"):
        df[col] = [json.loads(v) if isinstance(v, str) else None for v in df[col]]
    return df


__all__ = [
    "COLUMNS",
    "PHASES",
    "RESULTS_SCHEMA_VERSION",
    "normalize_row",
    "read_results",
    "rows_to_parquet",
]
