"""The harness comparison with the backbone fixed (the paper's Table 4 setting).

For every model run under two or more harnesses, one row per agent: its harness, accuracy,
mean tokens (input, cached input, output, reasoning), cost per task, mean latency and how
its attempts ended (the end states of the official native runner: ``submitted``,
``no_prediction``, ``wall_time_exhausted`` ...). Rows are sorted by accuracy within a
model.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

COLUMNS = (
    "model",
    "harness",
    "label",
    "accuracy_pct",
    "correct",
    "scored",
    "input_tokens_mean",
    "cached_input_tokens_mean",
    "output_tokens_mean",
    "reasoning_tokens_mean",
    "cost_per_task_usd",
    "latency_mean_s",
    "end_states",
)


def end_states(row: Any) -> str:
    """The ``status_*`` counts of an accuracy row as ``state n`` pairs, most frequent first.

    >>> end_states({"status_submitted": 3, "status_no_prediction": 1, "status_stopped": 0})
    'submitted 3, no_prediction 1'
    """
    counts = [
        (str(k)[len("status_") :], int(v))
        for k, v in dict(row).items()
        if str(k).startswith("status_") and v == v and int(v) > 0
    ]
    counts.sort(key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{k} {v}" for k, v in counts)


def harness_comparison_table(accuracy: Any, efficiency: Any) -> Any:
    """One row per agent of each model run under two or more harnesses."""
    import pandas as pd

    if accuracy.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    acc = accuracy.dropna(subset=["model"])
    many = acc.groupby("model")["harness"].nunique()
    acc = acc[acc["model"].isin(many[many >= 2].index)]
    if acc.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    eff = efficiency.set_index("label")
    rows = []
    for _, a in acc.iterrows():
        e = eff.loc[a["label"]] if a["label"] in eff.index else {}
        rows.append(
            {
                "model": a["model"],
                "harness": a["harness"],
                "label": a["label"],
                "accuracy_pct": a["accuracy_pct"],
                "correct": int(a["correct"]),
                "scored": int(a["scored"]),
                **{c: (e.get(c) if hasattr(e, "get") else None) for c in COLUMNS[6:12]},
                "end_states": end_states(a),
            }
        )
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    key = out["accuracy_pct"].astype(float).fillna(-1.0)
    return (
        out.assign(_k=key)
        .sort_values(["model", "_k"], ascending=[True, False], kind="stable")
        .drop(columns="_k")
        .reset_index(drop=True)
    )


__all__ = ["COLUMNS", "end_states", "harness_comparison_table"]
