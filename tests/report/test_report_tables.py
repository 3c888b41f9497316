"""Table computations on small hand-made frames, and the modules' own examples."""

from __future__ import annotations

import doctest
import importlib

import pandas as pd
import pytest

from dataspace.report.characteristics import assign_groups, language_setting
from dataspace.report.load import RunData, RunSource, combine
from dataspace.report.tables import (
    accuracy_table,
    efficiency_table,
    overlap_tables,
    pareto_front,
    pass_at_k,
    pass_at_k_table,
    per_task_table,
    timings_table,
)

MODULES = [
    "characteristics",
    "load",
    "page",
    "plots",
    "render",
    "basic",
    "build",
    "tables",
    "tracepages",
    "trace_render",
    "conversation",
    "native_trace",
    "audit",
]


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name):
    module = importlib.import_module(f"dataspace.report.{name}")
    result = doctest.testmod(module)
    assert result.failed == 0


def _frame(rows, metadata=None):
    df = pd.DataFrame(rows)
    for col in ("run_id", "harness", "model", "infra_retries", "task_metadata"):
        if col not in df:
            df[col] = None
    df["run_id"] = "r"
    run = RunData(source=RunSource(store=None), run_id="r", results=df, summary=None)
    return combine([run])


def _row(agent, task, passed, status="submitted", attempt=1, **kw):
    base = {
        "agent": agent,
        "task_id": task,
        "attempt": attempt,
        "status": status,
        "passed": passed,
        "input_tokens": 100,
        "cached_input_tokens": 40,
        "output_tokens": 10,
        "reasoning_tokens": 4,
        "cost_usd": 0.5,
        "model_turns": 3,
        "tool_actions": 2,
        "wall_seconds": 10.0,
        "working_seconds": 9.0,
    }
    base.update(kw)
    return base


def test_accuracy_counts_infra_unscored_and_unscheduled_apart():
    df = _frame(
        [
            _row("a", "task_1", True),
            _row("a", "task_2", False),
            _row("a", "task_3", False, status="infrastructure_error", input_tokens=None),
            _row("a", "task_4", None),  # hidden gold: unscored
            _row("a", "task_5", None, status="not_scheduled"),
        ]
    )
    acc = accuracy_table(df).iloc[0]
    assert (acc.attempts, acc.scored, acc.correct) == (5, 3, 1)
    assert acc.accuracy_pct == pytest.approx(100 / 3)
    assert acc.accuracy_excl_infra_pct == pytest.approx(50.0)
    assert (acc.infra_failures, acc.unscored, acc.not_scheduled) == (1, 1, 1)
    assert acc.infra_failure_rate_pct == pytest.approx(20.0)
    assert acc.status_submitted == 3 and acc.status_infrastructure_error == 1
    eff = efficiency_table(df, accuracy_table(df)).iloc[0]
    assert eff.measured_attempts == 3  # neither the infra failure nor the unscheduled one
    assert eff.tokens_mean == 110
    assert eff.cost_total_usd == pytest.approx(1.5)
    assert eff.cost_per_correct_usd == pytest.approx(1.5)


def test_efficiency_splits_correct_and_incorrect_and_percentiles():
    rows = [
        _row("a", f"task_{i}", i % 2 == 0, input_tokens=100 * i, wall_seconds=float(i))
        for i in range(1, 11)
    ]
    df = _frame(rows)
    eff = efficiency_table(df, accuracy_table(df)).iloc[0]
    assert eff.latency_p90_s == pytest.approx(9.1)  # linear interpolation
    assert eff.latency_median_s == pytest.approx(5.5)
    assert eff.tokens_correct_mean == pytest.approx(sum(100 * i + 10 for i in (2, 4, 6, 8, 10)) / 5)
    assert eff.tokens_incorrect_mean == pytest.approx(
        sum(100 * i + 10 for i in (1, 3, 5, 7, 9)) / 5
    )
    tim = timings_table(df, accuracy_table(df)).iloc[0]
    assert tim.latency_max_s == 10.0 and tim.working_mean_s == 9.0


def test_pass_at_k_over_several_attempts():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    df = _frame(
        [_row("a", "task_1", p, attempt=n) for n, p in enumerate([True, False, False], 1)]
        + [_row("a", "task_2", False, attempt=n) for n in (1, 2, 3)]
    )
    pk = pass_at_k_table(df, ["a"]).iloc[0]
    assert pk["pass@1_pct"] == pytest.approx(100 / 6)
    assert pk["pass@3_pct"] == pytest.approx(50.0)
    single = _frame([_row("a", "task_1", True)])
    assert pass_at_k_table(single, ["a"]) is None


def test_overlap_uses_tasks_scored_for_every_agent():
    df = _frame(
        [
            _row("a", "task_1", True),
            _row("b", "task_1", True),
            _row("a", "task_2", False),
            _row("b", "task_2", True),
            _row("a", "task_3", False),
            _row("b", "task_3", False),
            _row("a", "task_4", True),
        ]
    )  # b never ran task_4
    ov = overlap_tables(df, ["a", "b"])
    s = ov.summary.set_index("measure")["tasks"]
    assert (
        s["tasks scored for every agent"],
        s["solved by all"],
        s["solved by none"],
        s["oracle union"],
    ) == (3, 1, 1, 2)
    per = ov.per_agent.set_index("label")
    assert per.loc["b", "solved_only_by_this"] == 1 and per.loc["a", "solved_only_by_this"] == 0
    wide = per_task_table(df, ["a", "b"]).set_index("task_id")
    assert wide.loc["task_2", "b"] == "1/1" and pd.isna(wide.loc["task_4", "b"])
    assert list(wide.index) == ["task_1", "task_2", "task_3", "task_4"]


def test_pareto_front_ignores_missing_and_keeps_ties_out():
    pts = [
        ("a", 1.0, 50.0),
        ("b", 1.0, 60.0),
        ("c", float("nan"), 99.0),
        ("d", 5.0, 60.0),
        ("e", 6.0, 70.0),
    ]
    assert pareto_front(pts) == ["b", "e"]


def test_odd_metadata_never_crashes_the_grouping():
    meta = {
        "t1": {
            "languages": "en",
            "operations": {"join": True, "aggregation": 0},
            "modalities_required": "PDF",
            "answer_rows": "many",
            "order_sensitive": 1,
            "workspace_bytes": True,
        },
        "t2": {
            "languages": {"question": ["zh"], "workspace": ["zh"]},
            "operations": None,
            "modalities_required": [],
        },
        "t3": None,
        "t4": {},
    }
    g = assign_groups(meta)
    assert g.groups["Join"] == {"t1": "Required"}
    assert g.groups["Aggregation"] == {"t1": "Absent"}
    assert g.groups["Document evidence"] == {"t1": "Required"}
    assert g.groups["Language"] == {"t2": "Single-language"}
    assert {"Answer rows", "Row order", "Workspace size", "Answer columns"} <= set(g.left_out)
    assert g.missing["Join"] == 3
    assert (
        language_setting({"question_language": "en", "workspace_language": "zh"})
        == "Cross-language"
    )


def test_pareto_labels_of_close_agents_do_not_overlap():
    """Five of six agents with nearly the same accuracy and tokens: their labels are
    stacked, not drawn over each other, in the figure the report saves."""
    from dataspace.report.plots import pareto_figure, pareto_plot

    rows = [
        {"label": f"agent-{i}", "metric": "tokens_mean", "value": 1000.0 + i,
         "accuracy_pct": 50.0 + 0.1 * i, "on_front": i == 0}
        for i in range(5)
    ]  # fmt: skip
    rows.append({"label": "agent-5", "metric": "tokens_mean", "value": 90_000.0,
                 "accuracy_pct": 95.0, "on_front": True})  # fmt: skip
    fig = pareto_plot(pd.DataFrame(rows), [r["label"] for r in rows])
    svg = pareto_figure(pd.DataFrame(rows), [r["label"] for r in rows])
    assert svg and all(f"agent-{i}" in svg for i in range(6))
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()  # laid out again, as saving does
    boxes = [t.get_window_extent(renderer) for ax in fig.axes for t in ax.texts]
    assert len(boxes) == 6
    assert not [(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :] if a.overlaps(b)]
