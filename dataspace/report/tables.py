"""The report's tables, computed from the combined results frame (one row per attempt).

Conventions (DESIGN.md "Results"; the paper's Tables 3, 11 and 12):

- Accuracy follows the official protocol: every scored attempt counts, and an attempt that
  ends without a correct answer (wrong, missing, budget exhausted, or an infrastructure
  failure that exhausted its retries) is incorrect. Infrastructure failures are also
  counted apart, with the accuracy they would leave if excluded, so they are never
  mistaken for agent behaviour. Attempts without gold (hidden answers) are unscored.
- Efficiency is measured over attempts with an agent outcome (not infrastructure failures,
  not unscheduled attempts). Tokens are input + output: cached tokens are part of input
  and reasoning tokens part of output, never added twice. Latency is the attempt's wall
  time (``wall_seconds``: staging, sandbox start, agent, collection, scoring and upload;
  queueing excluded); P90 interpolates linearly.
- With several attempts per task, accuracy is the mean over attempts (pass@1), and pass@k
  uses the unbiased estimator 1 - C(n-c, k) / C(n, k).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from dataspace.report.characteristics import CHARACTERISTICS, Grouping
from dataspace.stats import pass_at_k
from dataspace.status import AttemptStatus

logger = logging.getLogger(__name__)

INFRA_STATUS = AttemptStatus.INFRASTRUCTURE_ERROR.value
NOT_SCHEDULED = AttemptStatus.NOT_SCHEDULED.value
SKIPPED = AttemptStatus.SKIPPED.value  # an oracle on a task without gold: never run
NO_OUTCOME = (INFRA_STATUS, NOT_SCHEDULED, SKIPPED)
PHASE_COLUMNS = ("queue", "staging", "sandbox_start", "agent", "collect", "evaluation", "upload")
TOKEN_KINDS = ("input", "cached_input", "output", "reasoning")


def percent(num: float, den: float) -> float | None:
    """``100 * num / den``, or None for an empty denominator.

    >>> percent(272, 410)
    66.34146341463415
    >>> percent(1, 0) is None
    True
    """
    return None if not den else 100.0 * num / den


def pareto_front(points: Sequence[tuple[str, float | None, float | None]]) -> list[str]:
    """Labels of the points that no other point beats on both axes (lower x, higher y).

    Args:
        points: (label, resource, accuracy); points with a missing value are ignored.

    >>> pareto_front([("a", 1.0, 50.0), ("b", 2.0, 60.0), ("c", 3.0, 55.0)])
    ['a', 'b']
    """
    clean: list[tuple[str, float, float]] = []
    for lab, x, y in points:
        if x is not None and y is not None and not (math.isnan(x) or math.isnan(y)):
            clean.append((lab, x, y))
    clean.sort(key=lambda p: (p[1], -p[2]))
    front, best = [], -math.inf
    for lab, _x, y in clean:
        if y > best:
            front.append(lab)
            best = y
    return front


def _agent_info(df: Any) -> Any:
    first = df.drop_duplicates("label")[["label", "run_id", "agent", "harness", "model"]]
    return first.set_index("label")


def accuracy_table(df: Any) -> Any:
    """Accuracy per agent (Table 3) with correct counts, status counts and infra failures.

    Rows are sorted by accuracy, best first.
    """
    import pandas as pd

    info = _agent_info(df)
    status = df["status"].fillna("unknown")
    passed = df["passed"]
    frame = pd.DataFrame(
        {
            "label": df["label"],
            "task_id": df["task_id"],
            "scored": passed.notna() & (status != NOT_SCHEDULED),
            "correct": passed.fillna(False).astype(bool),
            "infra": status == INFRA_STATUS,
            "not_scheduled": status == NOT_SCHEDULED,
            "retried": df["infra_retries"].fillna(0).astype(float) > 0,
        }
    )
    frame["unscored"] = ~frame["scored"] & ~frame["not_scheduled"]
    frame["scored_infra"] = frame["scored"] & frame["infra"]
    g = frame.groupby("label", sort=False)
    out = pd.DataFrame(
        {
            "tasks": g["task_id"].nunique(),
            "attempts": g.size(),
            "scored": g["scored"].sum(),
            "correct": g["correct"].sum(),
            "infra_failures": g["infra"].sum(),
            "scored_infra": g["scored_infra"].sum(),
            "infra_retried": g["retried"].sum(),
            "unscored": g["unscored"].sum(),
            "not_scheduled": g["not_scheduled"].sum(),
        }
    )
    out["accuracy_pct"] = [
        percent(c, s) for c, s in zip(out["correct"], out["scored"], strict=True)
    ]
    out["accuracy_excl_infra_pct"] = [
        percent(c, s - i)
        for c, s, i in zip(out["correct"], out["scored"], out["scored_infra"], strict=True)
    ]
    out["infra_failure_rate_pct"] = [
        percent(i, a) for i, a in zip(out["infra_failures"], out["attempts"], strict=True)
    ]
    counts = pd.crosstab(df["label"], status)
    counts.columns = [f"status_{c}" for c in counts.columns]
    out = info.join(out).join(counts).drop(columns=["scored_infra"])
    out = out.fillna({c: 0 for c in counts.columns})
    for c in counts.columns:
        out[c] = out[c].astype(int)
    out = out.reset_index().rename(columns={"index": "label"})
    return _sort_by_accuracy(out)


def _sort_by_accuracy(out: Any) -> Any:
    key = out["accuracy_pct"].astype(float).fillna(-1.0)
    return (
        out.assign(_k=key)
        .sort_values("_k", ascending=False, kind="stable")
        .drop(columns="_k")
        .reset_index(drop=True)
    )


def _outcomes(df: Any) -> Any:
    return df[~df["status"].isin(NO_OUTCOME)]


def efficiency_table(df: Any, accuracy: Any) -> Any:
    """Efficiency per agent (Table 11, extended), in raw units (tokens, USD, seconds).

    Args:
        df: the combined results frame.
        accuracy: ``accuracy_table(df)``, for the accuracy and the correct count.
    """
    import numpy as np
    import pandas as pd

    d = _outcomes(df)
    num = pd.DataFrame({"label": d["label"]})
    for kind in TOKEN_KINDS:
        num[kind] = d[f"{kind}_tokens"].astype(float)
    num["tokens"] = num["input"] + num["output"]
    num["cost"] = d["cost_usd"].astype(float)
    num["actions"] = d["tool_actions"].astype(float)
    num["turns"] = d["model_turns"].astype(float)
    num["latency"] = d["wall_seconds"].astype(float)
    num["working"] = d["working_seconds"].astype(float)
    ok = d["passed"].fillna(False).astype(bool)
    num["tokens_ok"] = num["tokens"].where(ok)
    num["tokens_bad"] = num["tokens"].where(~ok & d["passed"].notna())
    num["actions_ok"] = num["actions"].where(ok)
    num["actions_bad"] = num["actions"].where(~ok & d["passed"].notna())
    g = num.groupby("label", sort=False)
    mean, median = g.mean(), g.median()
    out = pd.DataFrame({"measured_attempts": g.size()})
    out["tokens_mean"] = mean["tokens"]
    out["tokens_median"] = median["tokens"]
    for kind in TOKEN_KINDS:
        out[f"{kind}_tokens_mean"] = mean[kind]
        out[f"{kind}_tokens_median"] = median[kind]
    out["cost_total_usd"] = g["cost"].sum(min_count=1)
    out["cost_per_task_usd"] = mean["cost"]
    out["tool_actions_mean"] = mean["actions"]
    out["tool_actions_median"] = median["actions"]
    out["model_turns_mean"] = mean["turns"]
    out["model_turns_median"] = median["turns"]
    out["latency_mean_s"] = mean["latency"]
    out["latency_median_s"] = median["latency"]
    out["latency_p90_s"] = g["latency"].quantile(0.9)
    out["working_mean_s"] = mean["working"]
    out["tokens_correct_mean"] = mean["tokens_ok"]
    out["tokens_incorrect_mean"] = mean["tokens_bad"]
    out["tool_actions_correct_mean"] = mean["actions_ok"]
    out["tool_actions_incorrect_mean"] = mean["actions_bad"]
    acc = accuracy.set_index("label")
    out = acc[["harness", "model", "accuracy_pct", "correct"]].join(out, how="left")
    out["cost_per_correct_usd"] = [
        c / k if k and not math.isnan(c) else np.nan
        for c, k in zip(out["cost_total_usd"].astype(float), out["correct"].fillna(0), strict=True)
    ]
    return out.reset_index().rename(columns={"index": "label"})


def timings_table(df: Any, accuracy: Any) -> Any:
    """Latency, working time and mean phase timings per agent, in seconds."""
    import pandas as pd

    d = _outcomes(df)
    cols = {
        "latency": d["wall_seconds"].astype(float),
        "working": d["working_seconds"].astype(float),
    }
    for p in PHASE_COLUMNS:
        name = f"phase_{p}_seconds"
        cols[p] = (d[name] if name in d.columns else pd.Series(index=d.index, dtype=float)).astype(
            float
        )
    num = pd.DataFrame({"label": d["label"], **cols})
    g = num.groupby("label", sort=False)
    out = pd.DataFrame(
        {
            "latency_mean_s": g["latency"].mean(),
            "latency_median_s": g["latency"].median(),
            "latency_p90_s": g["latency"].quantile(0.9),
            "latency_max_s": g["latency"].max(),
            "working_mean_s": g["working"].mean(),
        }
    )
    for p in PHASE_COLUMNS:
        out[f"phase_{p}_mean_s"] = g[p].mean()
    out = accuracy.set_index("label")[[]].join(out, how="left")
    return out.reset_index().rename(columns={"index": "label"})


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def paper_efficiency_table(eff: Any) -> Any:
    """The efficiency table formatted as the paper prints it (Table 11).

    Columns: Acc. (%), Tokens (K) as "mean (median)", Cost (USD) per task, Actions,
    Latency (s) as "mean (P90)".
    """
    import pandas as pd

    rows = []
    for r in eff.itertuples(index=False):
        rows.append(
            {
                "agent": r.label,
                "Acc. (%)": _fmt(r.accuracy_pct, ".2f"),
                "Tokens (K)": f"{_fmt(r.tokens_mean / 1000, '.1f')} "
                f"({_fmt(r.tokens_median / 1000, '.1f')})",
                "Cost (USD)": _fmt(r.cost_per_task_usd, ".3f"),
                "Actions": _fmt(r.tool_actions_mean, ".1f"),
                "Latency (s)": f"{_fmt(r.latency_mean_s, '.1f')} ({_fmt(r.latency_p90_s, '.1f')})",
            }
        )
    return pd.DataFrame(
        rows, columns=["agent", "Acc. (%)", "Tokens (K)", "Cost (USD)", "Actions", "Latency (s)"]
    )


def _task_outcomes(df: Any) -> Any:
    """(label, task_id) -> attempts scored and passed."""
    import pandas as pd

    d = df[df["passed"].notna() & (df["status"] != NOT_SCHEDULED)]
    frame = pd.DataFrame(
        {"label": d["label"], "task_id": d["task_id"], "passed": d["passed"].astype(bool)}
    )
    g = frame.groupby(["label", "task_id"], sort=False)["passed"]
    return pd.DataFrame({"n": g.size(), "c": g.sum()}).reset_index()


def characteristics_table(df: Any, grouping: Grouping, labels: Sequence[str]) -> Any:
    """Accuracy per characteristic group and agent (Table 12), long format.

    Columns: characteristic, group, is_reference, n_tasks, label, scored, correct,
    accuracy_pct, gap_pp (percentage points against the characteristic's first group).
    """
    import pandas as pd

    per = _task_outcomes(df)
    all_tasks = set(df["task_id"].astype(str))
    rows = []
    for ch in CHARACTERISTICS:
        assigned = grouping.groups.get(ch.name)
        if not assigned:
            continue
        groups = per["task_id"].map(lambda t, a=assigned: a.get(str(t)))
        sub = per.assign(group=groups).dropna(subset=["group"])
        agg = sub.groupby(["group", "label"])[["n", "c"]].sum()
        ref: dict[str, float | None] = {}
        for gi, group in enumerate(ch.groups):
            n_tasks = sum(1 for t in all_tasks if assigned.get(t) == group)
            if n_tasks == 0:
                continue
            for label in labels:
                n, c = agg.loc[(group, label)] if (group, label) in agg.index else (0, 0)
                acc = percent(float(c), float(n))
                if gi == 0:
                    ref[label] = acc
                base = ref.get(label)
                rows.append(
                    {
                        "characteristic": ch.name,
                        "group": group,
                        "is_reference": gi == 0,
                        "n_tasks": n_tasks,
                        "label": label,
                        "scored": int(n),
                        "correct": int(c),
                        "accuracy_pct": acc,
                        "gap_pp": None if gi == 0 or acc is None or base is None else acc - base,
                    }
                )
    return pd.DataFrame(
        rows,
        columns=[
            "characteristic",
            "group",
            "is_reference",
            "n_tasks",
            "label",
            "scored",
            "correct",
            "accuracy_pct",
            "gap_pp",
        ],
    )


def characteristics_wide(long: Any, labels: Sequence[str]) -> Any:
    """Table 12's shape: one row per (characteristic, group), N, one column per agent."""
    import pandas as pd

    if long.empty:
        return pd.DataFrame(columns=["characteristic", "group", "N", *labels])
    wide = long.pivot_table(
        index=["characteristic", "group", "n_tasks"],
        columns="label",
        values="accuracy_pct",
        aggfunc="first",
        sort=False,
    )
    wide = wide.reindex(columns=list(labels)).reset_index().rename(columns={"n_tasks": "N"})
    wide.columns.name = None
    return wide


class Overlap(NamedTuple):
    """Solved-by-all / by-none / oracle union over the tasks every agent was scored on."""

    summary: Any
    per_agent: Any


def overlap_tables(df: Any, labels: Sequence[str]) -> Overlap:
    """Tasks solved by all agents, by none, and their oracle union.

    A task counts as solved by an agent when any of its attempts passed.
    """
    import pandas as pd

    per = _task_outcomes(df)
    per["solved"] = per["c"] > 0
    solved = per.pivot_table(
        index="task_id", columns="label", values="solved", aggfunc="first"
    ).reindex(columns=list(labels))
    common = solved.dropna()
    n = len(common)
    s = common.astype(bool)
    by_all = int(s.all(axis=1).sum()) if n else 0
    by_none = int((~s).all(axis=1).sum()) if n else 0
    union = n - by_none
    summary = pd.DataFrame(
        [
            {"measure": "agents compared", "tasks": len(labels), "pct_of_tasks": None},
            {"measure": "tasks scored for every agent", "tasks": n, "pct_of_tasks": None},
            {"measure": "solved by all", "tasks": by_all, "pct_of_tasks": percent(by_all, n)},
            {"measure": "solved by none", "tasks": by_none, "pct_of_tasks": percent(by_none, n)},
            {"measure": "oracle union", "tasks": union, "pct_of_tasks": percent(union, n)},
        ]
    )
    rows = []
    for label in labels:
        mine = s[label] if n else pd.Series(dtype=bool)
        others = (
            s.drop(columns=[label]).any(axis=1)
            if n and len(labels) > 1
            else pd.Series(False, index=s.index)
        )
        rows.append(
            {
                "label": label,
                "solved": int(mine.sum()),
                "solved_only_by_this": int((mine & ~others).sum()),
            }
        )
    return Overlap(summary=summary, per_agent=pd.DataFrame(rows))


def pass_at_k_table(df: Any, labels: Sequence[str]) -> Any | None:
    """pass@k per agent for k = 1..max attempts, or None with one attempt per task."""
    import pandas as pd

    per = _task_outcomes(df)
    if per.empty or int(per["n"].max()) < 2:
        return None
    kmax = int(per["n"].max())
    rows = []
    for label in labels:
        mine = per[per["label"] == label]
        row: dict[str, Any] = {
            "label": label,
            "tasks": len(mine),
            "attempts_per_task_min": int(mine["n"].min()) if len(mine) else 0,
        }
        for k in range(1, kmax + 1):
            vals = [
                pass_at_k(int(n), int(c), k)
                for n, c in zip(mine["n"], mine["c"], strict=True)
                if n >= k
            ]
            row[f"pass@{k}_pct"] = 100.0 * sum(vals) / len(vals) if vals else None
            row[f"pass@{k}_tasks"] = len(vals)
        rows.append(row)
    return pd.DataFrame(rows)


def spread_table(accuracy: Any) -> Any:
    """Harness spread with the model fixed, and backbone range with the harness fixed."""
    import pandas as pd

    rows = []
    acc = accuracy.dropna(subset=["accuracy_pct"])
    for kind, fixed_col, vary_col in (
        ("harness spread (model fixed)", "model", "harness"),
        ("backbone range (harness fixed)", "harness", "model"),
    ):
        for fixed, grp in acc.dropna(subset=[fixed_col]).groupby(fixed_col, sort=False):
            if grp[vary_col].nunique() < 2:
                continue
            best = grp.loc[grp["accuracy_pct"].idxmax()]
            worst = grp.loc[grp["accuracy_pct"].idxmin()]
            rows.append(
                {
                    "kind": kind,
                    "fixed": fixed,
                    "agents": len(grp),
                    "best": best["label"],
                    "best_accuracy_pct": best["accuracy_pct"],
                    "worst": worst["label"],
                    "worst_accuracy_pct": worst["accuracy_pct"],
                    "spread_pp": best["accuracy_pct"] - worst["accuracy_pct"],
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "kind",
            "fixed",
            "agents",
            "best",
            "best_accuracy_pct",
            "worst",
            "worst_accuracy_pct",
            "spread_pp",
        ],
    )


PARETO_METRICS: tuple[tuple[str, str, float], ...] = (
    # (efficiency column, axis label, scale)
    ("tokens_mean", "mean tokens per task (K)", 1e-3),
    ("cost_per_task_usd", "mean cost per task (USD)", 1.0),
    ("tool_actions_mean", "mean tool actions per task", 1.0),
    ("latency_mean_s", "mean latency per task (s)", 1.0),
)


def pareto_table(eff: Any) -> Any:
    """For each resource metric, the Pareto-efficient agents (higher accuracy, lower use)."""
    import pandas as pd

    rows = []
    for col, axis, scale in PARETO_METRICS:
        pts = []
        for _, r in eff.iterrows():
            x = _num(r[col])
            pts.append((str(r["label"]), None if x is None else x * scale, _num(r["accuracy_pct"])))
        front = pareto_front(pts)
        for label, x, y in pts:
            rows.append(
                {
                    "metric": col,
                    "axis": axis,
                    "label": label,
                    "value": x,
                    "accuracy_pct": y,
                    "on_front": label in front,
                }
            )
    return pd.DataFrame(
        rows, columns=["metric", "axis", "label", "value", "accuracy_pct", "on_front"]
    )


def _num(v: Any) -> float | None:
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def per_task_table(df: Any, labels: Sequence[str]) -> Any:
    """One row per task: how many agents solved it and each agent's passed/scored."""
    import pandas as pd

    per = _task_outcomes(df)
    cell = per.assign(v=per["c"].astype(int).astype(str) + "/" + per["n"].astype(int).astype(str))
    wide = cell.pivot_table(index="task_id", columns="label", values="v", aggfunc="first")
    wide = wide.reindex(columns=list(labels))
    solvers = per.assign(s=per["c"] > 0).groupby("task_id")["s"].sum()
    tasks = sorted(set(df["task_id"].astype(str)), key=_task_sort_key)
    out = pd.DataFrame({"task_id": tasks})
    out["solved_by"] = [int(solvers.get(t, 0)) for t in tasks]
    out = out.join(wide, on="task_id")
    out.columns.name = None
    return out


def _task_sort_key(task: str) -> tuple[int, str]:
    head, _, tail = task.rpartition("_")
    return (int(tail), head) if tail.isdigit() else (1 << 62, task)


FAILURE_CODES = (
    "relation_mismatch",
    "row_count_mismatch",
    "column_count_mismatch",
    "type_normalization_failed",
    "invalid_prediction_csv",
    "missing_prediction",
)


def failures_table(df: Any, labels: Sequence[str]) -> Any:
    """Incorrect attempts per agent by the evaluator's error code (the paper's symptom view).

    Attempts lost to infrastructure failures count as incorrect in accuracy; they are a
    column of their own (``infrastructure_error``) since the evaluator never saw them.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"label": ["a", "a", "a"], "status": ["submitted"] * 3,
    ...     "passed": [True, False, False], "error_code": [None, "relation_mismatch",
    ...     "relation_mismatch"]})
    >>> failures_table(df, ["a"]).to_dict("records")
    [{'label': 'a', 'scored': 3, 'incorrect': 2, 'relation_mismatch': 2}]
    """
    import pandas as pd

    scored = df[df["passed"].notna() & (df["status"] != NOT_SCHEDULED)]
    wrong = scored[~scored["passed"].astype(bool)]
    code = wrong["error_code"].where(wrong["error_code"].notna(), wrong["status"])
    code = code.where(wrong["status"] != INFRA_STATUS, INFRA_STATUS).fillna("unknown")
    present = set(code)
    order = [c for c in FAILURE_CODES if c in present]
    order += sorted(present - set(order))
    rows = []
    for label in labels:
        mine = code[wrong["label"] == label]
        row: dict[str, Any] = {
            "label": label,
            "scored": int((scored["label"] == label).sum()),
            "incorrect": len(mine),
        }
        counts = mine.value_counts()
        row.update({c: int(counts.get(c, 0)) for c in order})
        rows.append(row)
    return pd.DataFrame(rows, columns=["label", "scored", "incorrect", *order])


def common_tasks(df: Any) -> tuple[set[str], dict[str, int]]:
    """The tasks every agent attempted, and how many tasks each agent attempted.

    >>> import pandas as pd
    >>> common_tasks(pd.DataFrame({"label": ["a", "a", "b"], "task_id": ["t1", "t2", "t1"]}))
    ({'t1'}, {'a': 2, 'b': 1})
    """
    sets = {str(k): set(map(str, g)) for k, g in df.groupby("label", sort=False)["task_id"]}
    common = set.intersection(*sets.values()) if sets else set()
    return common, {k: len(v) for k, v in sets.items()}


def task_sort_key(task: str) -> tuple[int, str]:
    """Sort ``task_N`` ids by number, anything else after them by name.

    >>> sorted(["task_10", "x", "task_2"], key=task_sort_key)
    ['task_2', 'task_10', 'x']
    """
    return _task_sort_key(task)


def labels_in_order(accuracy: Any) -> list[str]:
    """Agent labels in the accuracy table's order (best first)."""
    return [str(x) for x in accuracy["label"]]


def metadata_counts(metadata: Mapping[str, Mapping[str, Any]]) -> int:
    """How many tasks carry any metadata."""
    return sum(1 for md in metadata.values() if md)


__all__ = [
    "INFRA_STATUS",
    "NOT_SCHEDULED",
    "PARETO_METRICS",
    "Overlap",
    "accuracy_table",
    "characteristics_table",
    "characteristics_wide",
    "common_tasks",
    "efficiency_table",
    "failures_table",
    "labels_in_order",
    "metadata_counts",
    "overlap_tables",
    "paper_efficiency_table",
    "pareto_front",
    "pareto_table",
    "pass_at_k",
    "pass_at_k_table",
    "per_task_table",
    "percent",
    "spread_table",
    "task_sort_key",
    "timings_table",
]
