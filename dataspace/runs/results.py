"""The results table: one row per attempt, a fixed schema, stored as Parquet.

A row is a :class:`ResultRow`: one frozen record whose ``status`` is an ``AttemptStatus``,
built only here (:meth:`ResultRow.finished` for an attempt that ran,
:meth:`ResultRow.skipped` and :meth:`ResultRow.unfinished` for one that did not), written
as ``result.json`` and as a row of ``results.parquet`` (:meth:`ResultRow.to_dict`) and read
back from either (:meth:`ResultRow.from_row`). It is also a read-only mapping of its
columns, so ``row["status"]`` reads as it always has.

Nested records (the evaluator's verdict, the task's metadata) are kept as JSON strings so
that the schema never depends on what a release annotates.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dataspace.status import ENDPOINT_UNREACHABLE, AttemptStatus

RESULTS_SCHEMA_VERSION = "1.1"  # 1.1 adds the columns after ``verdict``; 1.0 still reads
PHASES = ("queue", "staging", "sandbox_start", "agent", "collect", "evaluation", "upload")

# (column, arrow type name); order is the file's column order.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "string"),
    ("key", "string"),
    ("agent", "string"),
    ("harness", "string"),
    ("protocol", "string"),
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
    # schema 1.1: an agent outcome the model endpoint's outage decided (see ResultRow)
    ("endpoint_unreachable", "bool"),
    ("try_id", "string"),
    ("earlier_tries_cost_usd", "float64"),
)


_NAMES = tuple(name for name, _ in COLUMNS)
_PHASE_COLUMNS = {f"phase_{p}_seconds" for p in PHASES}


@dataclass(frozen=True, kw_only=True)
class ResultRow(Mapping[str, Any]):
    """One attempt's row of the results (the columns of ``COLUMNS``, in their order).

    Usage and timing columns are None for an attempt that did not run (skipped or
    unfinished); ``passed`` is None for an unscored task, and False for an infrastructure
    error on a scored one (it scores as incorrect).

    ``endpoint_unreachable`` marks an attempt whose end the model endpoint's outage decided:
    a connection-level failure (refused, reset, DNS, TLS, timeout before any byte) past the
    profile's retries. Under the official profile the row keeps the official outcome
    (``runtime_error``) in the official accounting and is marked beside it; ``dataspace run
    SPEC --retry endpoint_unreachable`` reruns exactly those. ``try_id`` names the try that
    wrote the row; ``earlier_tries_cost_usd`` is what the attempt's earlier tries spent
    (killed mid-way, failed on infrastructure, or rerun), which ``cost_usd`` (the scored
    try's own) leaves out.
    """

    run_id: str
    key: str
    agent: str
    harness: str
    protocol: str | None = None
    model: str | None = None
    task_id: str
    attempt: int
    status: AttemptStatus
    scored: bool = True
    passed: bool | None = None
    error_code: str | None = None
    error: str | None = None
    infra_retries: int = 0
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    model_turns: int | None = None
    tool_actions: int | None = None
    model_calls: int | None = None
    model_seconds: float | None = None
    model_retries: int | None = None
    model_retry_seconds: float | None = None
    model_queue_seconds: float | None = None
    wall_seconds: float | None = None
    working_seconds: float | None = None
    phase_queue_seconds: float | None = None
    phase_staging_seconds: float | None = None
    phase_sandbox_start_seconds: float | None = None
    phase_agent_seconds: float | None = None
    phase_collect_seconds: float | None = None
    phase_evaluation_seconds: float | None = None
    phase_upload_seconds: float | None = None
    sandbox_enforcement: str | None = None
    verdict: Mapping[str, Any] | None = None
    task_metadata: Mapping[str, Any] = field(default_factory=dict)
    endpoint_unreachable: bool = False
    try_id: str | None = None
    earlier_tries_cost_usd: float | None = None

    # ---- the ways a row is made ---------------------------------------------------------
    @classmethod
    def finished(
        cls,
        *,
        identity: Mapping[str, Any],
        end_state: str,
        verdict: Mapping[str, Any] | None,
        error: str | None,
        infra_retries: int,
        usage: Mapping[str, Any],
        model_turns: int,
        tool_actions: int,
        wall_seconds: float,
        working_seconds: float,
        phases: Mapping[str, float],
        sandbox_enforcement: str,
        endpoint_unreachable: bool = False,
        try_id: str | None = None,
    ) -> ResultRow:
        """The row of an attempt that ran to an agent outcome.

        Args:
            identity: ``run_id, key, agent, harness, protocol, model, task_id, attempt,
                task_metadata`` (see :func:`row_identity`).
            end_state: the harness's end state (an ``AttemptStatus`` value).
            verdict: the evaluator's verdict, None for an unscored task.
            error: the harness's one-line error, if any.
            infra_retries: infrastructure failures of earlier tries of the attempt.
            usage: ``dataspace.agents.Usage.to_dict()``.
            model_turns: model calls that counted as turns.
            tool_actions: tool calls executed.
            wall_seconds: the attempt's wall time.
            working_seconds: wall time minus time waiting on model retries.
            phases: seconds per phase (``PHASES``).
            sandbox_enforcement: how the sandbox enforced its limits.
            endpoint_unreachable: the outcome was decided by an unreachable endpoint.
            try_id: the id of the try that ran (its usage journal's name).
        """
        unknown = sorted(set(phases) - set(PHASES))
        if unknown:
            raise ValueError(f"unknown phases {unknown} (known: {PHASES})")
        return cls(
            **identity,
            status=AttemptStatus(end_state),
            scored=verdict is not None,
            passed=None if verdict is None else bool(verdict["passed"]),
            error_code=None if verdict is None else verdict.get("error_code"),
            error=error,
            verdict=None if verdict is None else dict(verdict),
            infra_retries=infra_retries,
            input_tokens=int(usage["input_tokens"]),
            cached_input_tokens=int(usage["cached_input_tokens"]),
            output_tokens=int(usage["output_tokens"]),
            reasoning_tokens=int(usage["reasoning_tokens"]),
            cost_usd=float(usage["cost_usd"]),
            model_turns=model_turns,
            tool_actions=tool_actions,
            model_calls=int(usage["model_calls"]),
            model_seconds=float(usage["model_seconds"]),
            model_retries=int(usage["retries"]),
            model_retry_seconds=float(usage["retry_seconds"]),
            model_queue_seconds=float(usage.get("queue_seconds", 0.0)),
            wall_seconds=wall_seconds,
            working_seconds=working_seconds,
            sandbox_enforcement=sandbox_enforcement,
            **_phase_columns(phases),
            endpoint_unreachable=endpoint_unreachable,
            try_id=try_id,
        )

    @classmethod
    def skipped(cls, *, identity: Mapping[str, Any], reason: str) -> ResultRow:
        """The row of an attempt that is never run (an oracle on a task without gold)."""
        return cls(**identity, status=AttemptStatus.SKIPPED, scored=False, error=reason)

    @classmethod
    def unfinished(
        cls,
        *,
        identity: Mapping[str, Any],
        scored: bool,
        failures: Sequence[Mapping[str, Any]],
        reason: str,
    ) -> ResultRow:
        """The row of an attempt with no result yet (a rerun tries it again).

        Args:
            identity: the identity columns (see :func:`row_identity`).
            scored: the task has gold and a config.
            failures: its recorded infrastructure failures, oldest first; with any it is an
                ``infrastructure_error`` (and scores as incorrect), else ``not_scheduled``.
            reason: why it was not scheduled (used when there are no failures).
        """
        if failures:
            last = failures[-1]
            code = None if last.get("code") is None else str(last["code"])
            return cls(
                **identity,
                status=AttemptStatus.INFRASTRUCTURE_ERROR,
                scored=scored,
                passed=False if scored else None,
                error_code=code,
                error=str(last.get("error", "")),
                infra_retries=len(failures),
                endpoint_unreachable=code == ENDPOINT_UNREACHABLE,
            )
        return cls(**identity, status=AttemptStatus.NOT_SCHEDULED, scored=scored, error=reason)

    def priced(self, cost_usd: float | None) -> ResultRow:
        """The row with its cost replaced (recomputed from its tokens at other prices)."""
        return dataclasses.replace(self, cost_usd=cost_usd)

    def with_earlier_tries(self, cost_usd: float | None) -> ResultRow:
        """The row with what its attempt's earlier tries spent."""
        return dataclasses.replace(self, earlier_tries_cost_usd=cost_usd)

    @property
    def spent_usd(self) -> float:
        """Every model call of the attempt: this try's and its earlier tries' cost."""
        return float(self.cost_usd or 0.0) + float(self.earlier_tries_cost_usd or 0.0)

    # ---- the stored forms ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The row as ``result.json`` and the Parquet writer take it (status as text)."""
        out = {name: getattr(self, name) for name in _NAMES}
        out["status"] = self.status.value
        out["verdict"] = None if self.verdict is None else dict(self.verdict)
        out["task_metadata"] = dict(self.task_metadata)
        return out

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ResultRow:
        """A row read back from ``result.json`` or ``results.parquet`` (any schema 1.x).

        Columns it does not have are None (a row written before a column existed); JSON
        columns may be decoded or still JSON text.

        Raises:
            ValueError: no ``status``, or one that is not an ``AttemptStatus``.
        """
        values: dict[str, Any] = {}
        for name, kind in COLUMNS:
            v = row.get(name)
            if kind == "json" and isinstance(v, str):
                v = json.loads(v)
            values[name] = v
        values["status"] = AttemptStatus(str(row.get("status")))
        values["task_metadata"] = values["task_metadata"] or {}
        for name in ("scored",):
            if values[name] is None:
                values[name] = True
        values["endpoint_unreachable"] = bool(values["endpoint_unreachable"])
        if values["infra_retries"] is None:
            values["infra_retries"] = 0
        return cls(**values)

    # ---- a read-only mapping of the columns ---------------------------------------------
    def __getitem__(self, name: str) -> Any:
        if name not in _FIELDS:
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(_NAMES)

    def __len__(self) -> int:
        return len(_NAMES)


_FIELDS = frozenset(_NAMES)


def _phase_columns(phases: Mapping[str, float]) -> dict[str, Any]:
    return {f"phase_{k}_seconds": float(v) for k, v in phases.items()}


def row_identity(
    *,
    run_id: str,
    key: str,
    agent: str,
    harness: str,
    protocol: str,
    model: str | None,
    task_id: str,
    attempt: int,
    task_metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The columns every row has, whatever became of its attempt."""
    return {
        "run_id": run_id,
        "key": key,
        "agent": agent,
        "harness": harness,
        "protocol": protocol,
        "model": model,
        "task_id": task_id,
        "attempt": attempt,
        "task_metadata": dict(task_metadata or {}),
    }


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


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> Any:
    """Rows -> a pyarrow Table with the fixed schema."""
    import pyarrow as pa

    return pa.Table.from_pylist([normalize_row(r) for r in rows], schema=_arrow_schema())


def conform_table(table: Any) -> Any:
    """A table read from any schema 1.x file, with the current columns in their order.

    Columns an older file lacks are null; columns the schema does not know are dropped.
    """
    import pyarrow as pa

    schema = _arrow_schema()
    if table.schema.remove_metadata().equals(schema.remove_metadata()):
        return table.replace_schema_metadata(schema.metadata)
    cols = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def table_to_parquet(table: Any, *, metadata: Mapping[str, str] | None = None) -> bytes:
    """Serialize a results table to Parquet bytes (extra key-value metadata in its footer)."""
    import pyarrow.parquet as pq

    if metadata:
        merged = dict(table.schema.metadata or {})
        merged.update({k.encode(): v.encode() for k, v in metadata.items()})
        table = table.replace_schema_metadata(merged)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def rows_to_parquet(
    rows: Iterable[Mapping[str, Any]], *, metadata: Mapping[str, str] | None = None
) -> bytes:
    """Serialize rows to Parquet bytes with the fixed schema."""
    return table_to_parquet(rows_to_table(rows), metadata=metadata)


def read_parquet(source: Any) -> Any:
    """One Parquet file (a path, its bytes or a file object) as a pyarrow Table.

    The table ``pyarrow.parquet.read_table`` gives, metadata included, without importing
    ``pyarrow.dataset`` (which ``read_table`` does, at a cost to every process that reads).
    """
    import pyarrow.parquet as pq

    return pq.ParquetFile(io.BytesIO(source) if isinstance(source, bytes) else source).read()


def read_rows(data: bytes) -> list[ResultRow]:
    """Parquet bytes -> the rows as records (nulls stay None; no pandas)."""
    return [ResultRow.from_row(r) for r in read_parquet(data).to_pylist()]


def read_results(data: bytes) -> Any:
    """Parquet bytes -> pandas DataFrame with ``verdict`` and ``task_metadata`` decoded."""
    return table_to_frame(read_parquet(data))


def table_to_frame(table: Any) -> Any:
    """A results table -> pandas DataFrame with ``verdict`` and ``task_metadata`` decoded."""
    df = table.to_pandas()
    for col in ("verdict", "task_metadata"):
        if col in df.columns:
            df[col] = _decoded(df[col])
    return df


def _decoded(values: Iterable[Any]) -> list[Any]:
    """JSON texts decoded, each distinct text once.

    A task's metadata repeats on every attempt of it; rows with the same text share the
    decoded object (read-only, as the release's metadata is shared by a task's rows).

    >>> a, b, c = _decoded(['{"x": 1}', '{"x": 1}', None])
    >>> a == {"x": 1} and a is b and c is None
    True
    """
    seen: dict[str, Any] = {}
    out: list[Any] = []
    for v in values:
        if not isinstance(v, str):
            out.append(None)
        elif v in seen:
            out.append(seen[v])
        else:
            out.append(seen.setdefault(v, json.loads(v)))
    return out


__all__ = [
    "COLUMNS",
    "PHASES",
    "RESULTS_SCHEMA_VERSION",
    "ResultRow",
    "conform_table",
    "normalize_row",
    "read_parquet",
    "read_results",
    "read_rows",
    "row_identity",
    "rows_to_parquet",
    "rows_to_table",
    "table_to_frame",
    "table_to_parquet",
]
