"""Stage 2 entry point: sample one task database for one query, with K seeded attempts.

``sample(db_path, sql, policy=..., dest=...)`` reads the query's safeguards, selects rows
(anchors, fill, closure), writes a fresh SQLite file, validates its structure, executes the
query on it and accepts the attempt when the result is not unexpectedly empty or
degenerate. A failed attempt is retried with a derived seed (and a larger witness cap);
problems no seed can fix (a missing column, an empty protected join, type-incompatible join
columns, an unpinned current date) reject the item at once. The ledger records everything
needed to reproduce and audit the sample; it never goes into the workspace.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.errors import BuildError, SourceError
from builder.sampling.materialize import (
    file_sha256,
    foreign_key_report,
    materialize,
    structural_problems,
)
from builder.sampling.policy import SamplingPolicy
from builder.sampling.safeguards import Safeguards, extract_safeguards
from builder.sampling.sampler import (
    SamplingError,
    check_relationships,
    foreign_keys,
    select_rows,
    source_index,
)
from builder.transform.gates import Execution, execute, nondeterminism
from builder.transform.schema import read_schema

logger = logging.getLogger(__name__)

STAGE = "sample"


@dataclass(frozen=True, kw_only=True)
class SampleResult:
    """A sampled task database and the query's result on it.

    Attributes:
        db_path: the new SQLite file.
        columns: result column names.
        rows: result rows (the candidate gold; it may differ from the source result).
        attempt: the attempt that was accepted (1-based).
        ledger: provenance for ``ledger/task_N/ledger.json`` under the key ``sampling``.
    """

    db_path: Path
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    attempt: int
    ledger: dict[str, Any] = field(default_factory=dict)


def result_sha256(columns: tuple[str, ...], rows: tuple[tuple[Any, ...], ...]) -> str:
    """A stable hash of a query result (header and typed rows).

    >>> result_sha256(("a",), ((1,),)) == result_sha256(("a",), ((1,),))
    True
    """
    body = json.dumps(
        {"columns": list(columns), "rows": [list(r) for r in rows]},
        ensure_ascii=False,
        default=repr,
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def sample(
    db_path: Path | str,
    sql: str,
    *,
    dest: Path | str,
    policy: SamplingPolicy | None = None,
    question: str | None = None,
    item_id: str = "item",
) -> SampleResult:
    """Sample a task database for ``sql`` from ``db_path`` into ``dest``.

    Args:
        db_path: the (translated) database to sample from; it is only read.
        sql: the (translated) query.
        dest: the SQLite file to write (replaced when it exists).
        policy: the sampling policy (defaults when None).
        question: the question, whose named entities become target bindings.
        item_id: the item id used in errors.

    Raises:
        BuildError: stage ``sample``, with a one-line reason, when no attempt succeeds.
    """
    t0 = time.perf_counter()
    policy = policy or SamplingPolicy()
    src, out = Path(db_path), Path(dest)
    why = nondeterminism(sql)
    if why:
        raise BuildError(item_id, STAGE, why)
    try:
        schema = read_schema(src)
    except SourceError as exc:
        raise BuildError(item_id, STAGE, str(exc)) from None
    index = source_index(src, schema)
    try:
        guards = extract_safeguards(sql, schema, question=question, conn=index.conn)
    except ValueError as exc:
        raise BuildError(item_id, STAGE, str(exc)) from None
    try:
        source_result = execute(index.conn, sql)
    except sqlite3.Error as exc:
        raise BuildError(item_id, STAGE, f"sql fails on the database: {exc}") from None
    if not source_result.rows:
        raise BuildError(item_id, STAGE, "sql returns nothing on the full database")
    guards, notes = _usable_witnesses(index, guards)
    try:
        fks = foreign_keys(schema, policy)
        check_relationships(index, schema, guards.relationships)
    except SamplingError as exc:
        raise BuildError(item_id, STAGE, exc.reason) from None
    t_prep = time.perf_counter() - t0

    retries: list[dict[str, Any]] = []
    last = ""
    for attempt in range(1, policy.attempts + 1):
        ta = time.perf_counter()
        try:
            sel = select_rows(index, schema, guards, policy, attempt)
        except SamplingError as exc:
            if not exc.retry:
                raise BuildError(item_id, STAGE, exc.reason) from None
            last = exc.reason
            retries.append(
                {"attempt": attempt, "seed": policy.attempt_seed(attempt), "reason": last}
            )
            continue
        materialize(src, schema, sel.rows, out)
        problems = structural_problems(out, schema, sel.rows, sel.protected, guards, index)
        fk_report = foreign_key_report(out, src, fks)
        if not fk_report.ok:
            problems.append(
                "foreign keys dangle in the sample: "
                + ", ".join(f"{k} ({v})" for k, v in fk_report.new_dangling.items())
            )
        if policy.strict_foreign_keys and fk_report.inherited:
            raise BuildError(
                item_id,
                STAGE,
                "references already dangle in the source: " + ", ".join(fk_report.inherited),
            )
        result: Execution | None = None
        if not problems:
            try:
                result = execute(out, sql)
            except sqlite3.Error as exc:
                problems.append(f"sql fails on the sample: {exc}")
        if result is not None:
            problems.extend(_task_problems(result, source_result, guards))
        if problems:
            last = problems[0]
            retries.append(
                {
                    "attempt": attempt,
                    "seed": policy.attempt_seed(attempt),
                    "reason": last,
                    "problems": problems[:10],
                }
            )
            logger.debug("%s: sampling attempt %d failed: %s", item_id, attempt, last)
            continue
        assert result is not None
        ledger = _ledger(
            src,
            out,
            sql,
            policy,
            attempt,
            retries,
            guards,
            sel,
            schema,
            index,
            fk_report,
            result,
            source_result,
            notes,
            {
                "prepare_s": round(t_prep, 4),
                "attempt_s": round(time.perf_counter() - ta, 4),
                "total_s": round(time.perf_counter() - t0, 4),
            },
        )
        return SampleResult(
            db_path=out, columns=result.columns, rows=result.rows, attempt=attempt, ledger=ledger
        )
    out.unlink(missing_ok=True)
    raise BuildError(item_id, STAGE, f"{last} (after {policy.attempts} attempts)")


def _usable_witnesses(index: Any, guards: Safeguards) -> tuple[Safeguards, list[str]]:
    import dataclasses

    keep = []
    notes = []
    for w in guards.witnesses:
        try:
            index.witness(w)
            keep.append(w)
        except sqlite3.Error as exc:
            notes.append(f"block {w.block} witness left to execution validation ({exc})")
    return dataclasses.replace(guards, witnesses=tuple(keep)), notes


def _task_problems(result: Execution, source: Execution, guards: Safeguards) -> list[str]:
    problems = []
    if guards.projection_width is not None and len(result.columns) != guards.projection_width:
        problems.append(
            f"result has {len(result.columns)} columns, the query projects "
            f"{guards.projection_width}"
        )
    if not result.rows:
        problems.append(
            f"result is empty after sampling (the full database gives {len(source.rows)} rows)"
        )
    elif all(v is None for r in result.rows for v in r) and any(
        v is not None for r in source.rows for v in r
    ):
        problems.append("result is only NULL after sampling")
    return problems


def _diagnostics(result: Execution, source: Execution, sql: str) -> list[str]:
    out = []
    if len(result.rows) < len(source.rows):
        out.append(f"result has {len(result.rows)} rows, the full database {len(source.rows)}")
    try:
        from sqlglot import exp

        from builder.transform.resolve import parse

        limit = parse(sql).args.get("limit")
        if isinstance(limit, exp.Limit) and isinstance(limit.expression, exp.Literal):
            n = int(limit.expression.this)
            if len(result.rows) < n <= len(source.rows):
                out.append(f"fewer rows ({len(result.rows)}) than the LIMIT {n}")
    except (ValueError, TypeError):
        pass
    return out


def _ledger(
    src: Path,
    out: Path,
    sql: str,
    policy: SamplingPolicy,
    attempt: int,
    retries: list[dict[str, Any]],
    guards: Safeguards,
    sel: Any,
    schema: Any,
    index: Any,
    fk_report: Any,
    result: Execution,
    source: Execution,
    notes: list[str],
    timings: dict[str, float],
) -> dict[str, Any]:
    before = {t.name: len(index.keys(t.name)) for t in schema.tables}
    after = {t.name: len(sel.rows[t.name]) for t in schema.tables}
    return {
        "source_db": src.name,
        "sql_sha256": hashlib.sha256(sql.encode()).hexdigest(),
        "policy": policy.to_json(),
        "seed": policy.seed,
        "attempt": attempt,
        "attempt_seed": policy.attempt_seed(attempt),
        "retries": retries,
        "budgets": {t.name: policy.budget_for(t.name) for t in schema.tables},
        "safeguards": guards.to_json(),
        "relationships": [fk.describe() for fk in foreign_keys(schema, policy)],
        "relationships_added": sorted(set(sel.relationships_added)),
        "rows_before": before,
        "rows_after": after,
        "anchors": dict(sel.anchors),
        "boundary_rows": dict(sel.boundary_rows),
        "predicate_rows": dict(sel.predicate_rows),
        "path_added": dict(sel.path_added),
        "filled": dict(sel.filled),
        "closure_added": dict(sel.closure_added),
        "capped_witness_blocks": sel.capped_witnesses,
        "foreign_keys": fk_report.to_json(),
        "db_sha256": file_sha256(out),
        "result_sha256": result_sha256(result.columns, result.rows),
        "result_rows": len(result.rows),
        "source_result_rows": len(source.rows),
        "diagnostics": _diagnostics(result, source, sql),
        "notes": notes,
        "timings": timings,
    }


__all__ = ["STAGE", "SampleResult", "result_sha256", "sample"]
