"""The report's intervals, pairwise comparisons, groups and per-task agreement.

Adds to the tables of ``dataspace.report.tables`` what ``dataspace.stats`` computes:

- ``accuracy``: ``accuracy_low_pct``/``accuracy_high_pct`` (Wilson) and ``group`` (letters:
  agents sharing one are not told apart by the Holm-adjusted exact McNemar tests).
- ``efficiency``: bootstrap bounds (over tasks) of mean tokens, cost, tool actions, latency.
- ``characteristics_long``: Wilson bounds per characteristic group and agent.
- ``pass_at_k``: bounds of pass@k and pass^k.
- ``pairwise``: every pair of agents on their shared scored tasks.
- ``harnesses``: Wilson bounds and the groups among the harnesses of each backbone.
- ``per_task``: how many agents' attempts disagree on the task; ``unsolved``: the scored
  tasks no agent solved (possibly broken tasks).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace import stats
from dataspace.report.tables import NO_OUTCOME

logger = logging.getLogger(__name__)

MEANS = (
    # (efficiency column, how the measure is read from a result row)
    ("tokens_mean", "tokens"),
    ("cost_per_task_usd", "cost_usd"),
    ("tool_actions_mean", "tool_actions"),
    ("latency_mean_s", "wall_seconds"),
)


def _pct(iv: stats.Interval) -> tuple[float, float]:
    return 100.0 * iv.low, 100.0 * iv.high


def accuracy_with_intervals(acc: Any, level: float) -> Any:
    """The accuracy table with its Wilson bounds after ``accuracy_pct``."""
    out = acc.copy()
    bounds = [
        _pct(stats.wilson(int(c), int(n), level))
        for c, n in zip(out["correct"], out["scored"], strict=True)
    ]
    at = list(out.columns).index("accuracy_pct") + 1
    out.insert(at, "accuracy_low_pct", [b[0] for b in bounds])
    out.insert(at + 1, "accuracy_high_pct", [b[1] for b in bounds])
    return out


def efficiency_with_intervals(eff: Any, df: Any, level: float, seed: int = stats.SEED) -> Any:
    """The efficiency table with bootstrap bounds (tasks resampled) of its main means."""
    import pandas as pd

    d = df[~df["status"].isin(NO_OUTCOME)]
    num = pd.DataFrame({"label": d["label"].astype(str), "task_id": d["task_id"].astype(str)})
    num["tokens"] = d["input_tokens"].astype(float) + d["output_tokens"].astype(float)
    for _col, src in MEANS[1:]:
        num[src] = d[src].astype(float)
    out = eff.copy()
    for col, src in MEANS:
        # one grouping per measure: each label's tasks in the order (and with the sums) of
        # grouping that label's rows alone
        g = num[num[src].notna()].groupby(["label", "task_id"])[src]
        sums, sizes = g.sum(), g.size()
        per_label = {
            str(lab): (list(s), list(sizes.loc[lab]))
            for lab, s in sums.groupby(level="label", sort=False)
        }
        lows, highs = [], []
        for label in out["label"].astype(str):
            s, n = per_label.get(label, ([], []))
            iv = stats.cluster_mean(s, n, level, seed=seed)
            lows.append(iv.low)
            highs.append(iv.high)
        at = list(out.columns).index(col) + 1
        out.insert(at, f"{col}_low", lows)
        out.insert(at + 1, f"{col}_high", highs)
    return out


def characteristics_with_intervals(long: Any, level: float) -> Any:
    """Table 12 in long form with Wilson bounds per group and agent."""
    out = long.copy()
    bounds = [
        _pct(stats.wilson(int(c), int(n), level))
        for c, n in zip(out["correct"], out["scored"], strict=True)
    ]
    at = list(out.columns).index("accuracy_pct") + 1
    out.insert(at, "accuracy_low_pct", [b[0] for b in bounds])
    out.insert(at + 1, "accuracy_high_pct", [b[1] for b in bounds])
    return out


def pass_at_k_with_intervals(
    pk: Any, outcomes: Mapping[str, Mapping[str, Sequence[bool]]], level: float
) -> Any:
    """pass@k and pass^k per agent with bootstrap bounds over tasks."""
    import pandas as pd

    kmax = max(int(c.split("@")[1].split("_")[0]) for c in pk.columns if c.startswith("pass@"))
    rows = []
    for r in pk.to_dict("records"):
        per = [(len(v), sum(map(bool, v))) for v in outcomes.get(str(r["label"]), {}).values()]
        row = {"label": r["label"], "tasks": r["tasks"]}
        for k in range(1, kmax + 1):
            at, n = stats.pass_k_interval(per, k, level=level)
            ev, _ = stats.pass_k_interval(per, k, every=True, level=level)
            row[f"pass@{k}_pct"] = 100 * at.estimate
            row[f"pass@{k}_low_pct"], row[f"pass@{k}_high_pct"] = _pct(at)
            row[f"pass^{k}_pct"] = 100 * ev.estimate
            row[f"pass^{k}_low_pct"], row[f"pass^{k}_high_pct"] = _pct(ev)
            row[f"k{k}_tasks"] = n
        rows.append(row)
    return pd.DataFrame(rows)


def harnesses_with_groups(
    harnesses: Any, outcomes: Mapping[str, Mapping[str, Sequence[bool]]], level: float
) -> tuple[Any, Any]:
    """The harness table with Wilson bounds and groups per backbone, and its pairs."""
    import pandas as pd

    out = harnesses.copy()
    bounds = [
        _pct(stats.wilson(int(c), int(n), level))
        for c, n in zip(out["correct"], out["scored"], strict=True)
    ]
    at = list(out.columns).index("accuracy_pct") + 1
    out.insert(at, "accuracy_low_pct", [b[0] for b in bounds])
    out.insert(at + 1, "accuracy_high_pct", [b[1] for b in bounds])
    groups: dict[str, str] = {}
    all_pairs = []
    for model, grp in out.groupby("model", sort=False):
        labels = [str(x) for x in grp["label"]]
        pairs = stats.pairwise(outcomes, labels, level)
        pairs.insert(0, "model", model)
        all_pairs.append(pairs)
        groups.update(stats.groups_of(pairs, labels))
    out.insert(at + 2, "group", [groups.get(str(x), "") for x in out["label"]])
    return out, (pd.concat(all_pairs, ignore_index=True) if all_pairs else pd.DataFrame())


def disagreement(outcomes: Mapping[str, Mapping[str, Sequence[bool]]]) -> dict[str, int]:
    """Task -> how many agents' attempts disagree on it (some passed, some failed).

    >>> disagreement({"a": {"t1": [True, False], "t2": [True]}, "b": {"t1": [False, True]}})
    {'t1': 2, 't2': 0}
    """
    out: dict[str, int] = {}
    for per in outcomes.values():
        for task, xs in per.items():
            mixed = len(xs) > 1 and 0 < sum(map(bool, xs)) < len(xs)
            out[task] = out.get(task, 0) + int(mixed)
    return dict(sorted(out.items()))


def disagreement_per_agent(outcomes: Mapping[str, Mapping[str, Sequence[bool]]]) -> Any:
    """Per agent: tasks with several attempts, and on how many the attempts disagree."""
    import pandas as pd

    rows = []
    for label, per in outcomes.items():
        multi = [xs for xs in per.values() if len(xs) > 1]
        mixed = sum(1 for xs in multi if 0 < sum(map(bool, xs)) < len(xs))
        rows.append(
            {
                "label": label,
                "tasks_with_several_attempts": len(multi),
                "tasks_attempts_disagree": mixed,
                "disagree_pct": 100.0 * mixed / len(multi) if multi else None,
            }
        )
    return pd.DataFrame(
        rows,
        columns=["label", "tasks_with_several_attempts", "tasks_attempts_disagree", "disagree_pct"],
    )


def unsolved_tasks(
    outcomes: Mapping[str, Mapping[str, Sequence[bool]]], labels: Sequence[str]
) -> Any:
    """The scored tasks that no agent solved in any attempt, with how many agents tried."""
    import pandas as pd

    from dataspace.report.tables import task_sort_key

    tried: dict[str, int] = {}
    solved: set[str] = set()
    for label in labels:
        for task, xs in outcomes.get(label, {}).items():
            tried[task] = tried.get(task, 0) + 1
            if any(xs):
                solved.add(task)
    tasks = sorted((t for t in tried if t not in solved), key=task_sort_key)
    return pd.DataFrame(
        {"task_id": tasks, "agents_tried": [tried[t] for t in tasks]},
        columns=["task_id", "agents_tried"],
    )


def add_comparisons(
    data: dict[str, Any], df: Any, labels: Sequence[str], level: float
) -> list[str]:
    """Put intervals, pairs, groups and per-task agreement into the report's tables.

    Returns the notes the report shows about them.
    """
    level = stats.check_level(level)
    outcomes = stats.scored_outcomes(df)
    notes: list[str] = []
    pairs = stats.pairwise(outcomes, labels, level)
    groups = stats.groups_of(pairs, labels)
    acc = accuracy_with_intervals(data["accuracy"], level)
    acc.insert(
        list(acc.columns).index("accuracy_high_pct") + 1,
        "group",
        [groups.get(str(x), "") for x in acc["label"]],
    )
    data["accuracy"] = acc
    data["efficiency"] = efficiency_with_intervals(data["efficiency"], df, level)
    if not data["characteristics_long"].empty:
        data["characteristics_long"] = characteristics_with_intervals(
            data["characteristics_long"], level
        )
    data["pairwise"] = pairs
    # Table 11 stays exactly as the paper prints it; its means' intervals are in the
    # extended efficiency tables and in efficiency.csv
    if data.get("pass_at_k") is not None:
        data["pass_at_k"] = pass_at_k_with_intervals(data["pass_at_k"], outcomes, level)
        data["attempt_agreement"] = disagreement_per_agent(outcomes)
    h = data.get("harnesses")
    if h is not None and not h.empty:
        data["harnesses"], data["harness_pairs"] = harnesses_with_groups(h, outcomes, level)
    per = data["per_task"]
    dis = disagreement(outcomes)
    per.insert(
        list(per.columns).index("solved_by") + 1,
        "attempts_disagree",
        [dis.get(str(t), 0) for t in per["task_id"]],
    )
    data["unsolved"] = unsolved_tasks(outcomes, labels)
    sizes = sorted({int(n) for n in pairs["shared_tasks"]}) if len(pairs) else []
    if len(sizes) > 1 or (sizes and any(len(outcomes.get(lab, {})) != sizes[0] for lab in labels)):
        notes.append(
            "Pairs of agents are compared on the scored tasks both ran (from "
            f"{sizes[0]} to {sizes[-1]} tasks per pair; each pair's count is in the "
            "pairwise table)."
        )
    if any(len(xs) > 1 for per in outcomes.values() for xs in per.values()):
        notes.append(
            "Several attempts per task: the Wilson interval and the McNemar test count every "
            "attempt as a trial (attempt i against attempt i), which is too confident when "
            "attempts of one task agree; the paired difference's bootstrap interval resamples "
            "whole tasks and does not make that assumption."
        )
    pct = f"{100 * level:g}%"
    notes.append(
        f"Intervals are {pct}: Wilson for accuracy, a bootstrap over tasks for means and "
        "pass@k; two agents differ when Holm's correction of the exact McNemar tests across "
        f"all {len(pairs)} pair(s) leaves p < {1 - level:.2g} (agents sharing a group letter "
        "are not told apart)."
    )
    return notes


__all__ = [
    "accuracy_with_intervals",
    "add_comparisons",
    "characteristics_with_intervals",
    "disagreement",
    "disagreement_per_agent",
    "efficiency_with_intervals",
    "harnesses_with_groups",
    "pass_at_k_with_intervals",
    "unsolved_tasks",
]
