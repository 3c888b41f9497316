"""A run's recorded estimate (``plan.json``, see ``dataspace.runs.plan``) beside its actual use.

One row per run and agent, and a ``total`` row per run: attempts, model calls, tokens, cost
and time as estimated when the run started (estimate and range) and as its attempts used
them, with whether the actual figure fell in the range.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.errors import DataSpaceError

logger = logging.getLogger(__name__)

MEASURES = (
    # (plan key, results column, display name)
    ("model_calls", "model_calls", "model calls"),
    ("input_tokens", "input_tokens", "input tokens"),
    ("cached_input_tokens", "cached_input_tokens", "cached input tokens"),
    ("output_tokens", "output_tokens", "output tokens"),
    ("cost_usd", "cost_usd", "cost USD"),
)


def _row(run: str, agent: str, measure: str, q: Mapping[str, Any], actual: float | None) -> dict:
    lo, hi = float(q["low"]), float(q["high"])
    eps = 1e-9 * max(1.0, abs(hi))
    return {
        "run_id": run,
        "agent": agent,
        "measure": measure,
        "estimate": float(q["estimate"]),
        "low": lo,
        "high": hi,
        "actual": actual,
        "in_range": None if actual is None else bool(lo - eps <= actual <= hi + eps),
    }


def _is_estimate(plan: object) -> bool:
    """Whether a ``plan.json`` holds an estimate.

    The controller's order of the pending attempts is written under the same name on every
    invocation and holds none: reading it as one failed every ``dataspace run`` at its end.

    >>> _is_estimate({"order": "longest_first", "attempts": []})
    False
    """
    keys = ("wall_seconds", *(k for k, _, _ in MEASURES))
    return isinstance(plan, dict) and all(k in plan for k in keys)


def estimate_vs_actual(runs: Sequence[tuple[Any, Mapping[str, Any]]], df: Any) -> Any:
    """Rows of estimate and actual for every run that recorded a plan.

    Args:
        runs: (run source, its summary) per run.
        df: the combined results frame.
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for source, summary in runs:
        try:
            plan = json.loads(source.store.get_bytes(source.key("plan.json")))
        except (DataSpaceError, OSError, ValueError):
            continue
        if not _is_estimate(plan):
            continue
        run_id = str(plan.get("run_id") or "")
        mine = df[df["run_id"] == run_id] if not df.empty else df
        ran = mine[mine["wall_seconds"].notna()] if len(mine) else mine
        for a in plan.get("agents") or []:
            name = str(a["agent"])
            d = ran[ran["agent"] == name] if len(ran) else ran
            rows.append(
                _row(
                    run_id,
                    name,
                    "attempts",
                    {"estimate": a["attempts"], "low": a["attempts"], "high": a["attempts"]},
                    float(len(d)),
                )
            )
            for key, col, label in MEASURES:
                actual = float(d[col].astype(float).fillna(0).sum()) if len(d) else 0.0
                rows.append(_row(run_id, name, label, a[key], actual))
            actual_s = float(d["wall_seconds"].astype(float).sum()) if len(d) else 0.0
            rows.append(_row(run_id, name, "attempt seconds", a["attempt_seconds"], actual_s))
        for key, col, label in MEASURES:
            actual = float(ran[col].astype(float).fillna(0).sum()) if len(ran) else 0.0
            rows.append(_row(run_id, "total", label, plan[key], actual))
        wall = summary.get("wall_seconds")
        rows.append(
            _row(
                run_id,
                "total",
                "wall seconds",
                plan["wall_seconds"],
                None if wall is None or summary.get("partial") else float(wall),
            )
        )
    cols = ["run_id", "agent", "measure", "estimate", "low", "high", "actual", "in_range"]
    return pd.DataFrame(rows, columns=cols)


def basis_lines(runs: Sequence[Any]) -> list[str]:
    """Where each recorded estimate came from, in words."""
    out = []
    for source in runs:
        try:
            plan = json.loads(source.store.get_bytes(source.key("plan.json")))
        except (DataSpaceError, OSError, ValueError):
            continue
        if not _is_estimate(plan):
            continue
        for a in plan.get("agents") or []:
            out.append(f"{plan.get('run_id')} {a['agent']}: from {a['source']}: {a['basis']}")
        out.append(f"{plan.get('run_id')} wall time: {plan.get('overhead_basis')}")
    return out


__all__ = ["basis_lines", "estimate_vs_actual"]
