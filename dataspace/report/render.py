"""Rendering the report's tables and figures as one HTML page and as Markdown."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dataspace.report.page import esc, fmt, is_missing, page, table_html, table_markdown
from dataspace.report.render_stats import (
    PAIRWISE_STYLE,
    characteristics_display,
    ci,
    estimates_html,
    level_text,
    markdown_sections,
    pairwise_matrix_html,
    pass_at_k_display,
    unsolved_html,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class AttemptCell:
    """One attempt in the per-task matrix."""

    attempt: int
    passed: bool | None
    status: str
    href: str | None = None
    error_code: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReportData:
    """Everything the report shows.

    Attributes:
        title: the page title.
        runs: one mapping per run (run_id, uri, attempts, agents, wall_seconds, ...).
        labels: agent labels, best first.
        tables: name -> DataFrame (the tables ``build_report`` writes).
        figures: name -> inline SVG.
        notes: remarks shown at the top (missing metadata, failures, conventions).
        cells: (task_id, label) -> attempts, for the per-task matrix with trace links.
        figure_hrefs: name -> the SVG file's path relative to the Markdown file.
        table_hrefs: name -> the CSV file's path relative to the report.
    """

    title: str
    runs: Sequence[Mapping[str, Any]]
    labels: Sequence[str]
    tables: Mapping[str, Any]
    figures: Mapping[str, str]
    notes: Sequence[str]
    cells: Mapping[tuple[str, str], Sequence[AttemptCell]] = field(default_factory=dict)
    figure_hrefs: Mapping[str, str] = field(default_factory=dict)
    table_hrefs: Mapping[str, str] = field(default_factory=dict)
    generated_at: str = ""
    extra_html: str = ""  # further sections (the failure audit), already escaped
    level: float = 0.95  # of every interval and test
    review_url: str | None = None  # the review console, for the tasks no agent solved
    estimate_basis: Sequence[str] = ()  # where each recorded estimate came from


PCT = ".2f"
ACCURACY_COLUMNS = {
    "label": "agent",
    "harness": "harness",
    "model": "model",
    "tasks": "tasks",
    "attempts": "attempts",
    "scored": "scored",
    "correct": "correct",
    "accuracy_pct": "accuracy %",
    "accuracy_interval": "accuracy % [interval]",
    "group": "group",
    "accuracy_excl_infra_pct": "accuracy excl. infra %",
    "infra_failures": "infra failures",
    "infra_failure_rate_pct": "infra failure %",
    "infra_retried": "infra-retried",
    "unscored": "unscored (no gold)",
    "not_scheduled": "not scheduled",
}


def _k(v: Any) -> str:
    return fmt(None if is_missing(v) else v / 1000.0, ".1f")


def accuracy_display(acc: Any) -> Any:
    """The accuracy table's columns for display (status counts after the main ones)."""
    optional = ("infra_retried", "unscored", "not_scheduled", "infra_failures")
    if "accuracy_low_pct" in acc.columns:
        acc = acc.assign(
            accuracy_interval=[
                ci(e, lo, hi, ".2f")
                for e, lo, hi in zip(
                    acc["accuracy_pct"],
                    acc["accuracy_low_pct"],
                    acc["accuracy_high_pct"],
                    strict=True,
                )
            ]
        )
    cols = [
        c
        for c in ACCURACY_COLUMNS
        if c in acc.columns and not (c in optional and (acc[c].fillna(0) == 0).all())
    ]  # counts that are zero for every agent say nothing (the CSV keeps them)
    if "accuracy_interval" in cols:  # the interval cell repeats the estimate
        cols.remove("accuracy_pct")
    # a status already counted by its own column (``not scheduled``) is shown once
    status = [
        c
        for c in acc.columns
        if c.startswith("status_") and c[len("status_") :] not in ACCURACY_COLUMNS
    ]
    return acc[cols + status].rename(
        columns={**ACCURACY_COLUMNS, **{c: c[len("status_") :].replace("_", " ") for c in status}}
    )


def _with_ci(r: Mapping[str, Any], col: str, spec: str, scale: float = 1.0) -> str:
    """A mean with its interval when the table carries one (``<col>_low``/``_high``)."""
    return ci(r.get(col), r.get(f"{col}_low"), r.get(f"{col}_high"), spec, scale)


def efficiency_display(eff: Any) -> Any:
    """Tokens in thousands, money in USD, times in seconds, one row per agent."""
    import pandas as pd

    rows = []
    for r in eff.to_dict("records"):
        rows.append(
            {
                "agent": r["label"],
                "accuracy %": r["accuracy_pct"],
                "attempts measured": r["measured_attempts"],
                "tokens K mean": _with_ci(r, "tokens_mean", ".1f", 1e-3),
                "tokens K median": _k(r["tokens_median"]),
                "input K mean (median)": f"{_k(r['input_tokens_mean'])} "
                f"({_k(r['input_tokens_median'])})",
                "cached K mean (median)": f"{_k(r['cached_input_tokens_mean'])} "
                f"({_k(r['cached_input_tokens_median'])})",
                "output K mean (median)": f"{_k(r['output_tokens_mean'])} "
                f"({_k(r['output_tokens_median'])})",
                "reasoning K mean (median)": f"{_k(r['reasoning_tokens_mean'])} "
                f"({_k(r['reasoning_tokens_median'])})",
                "cost/task USD": _with_ci(r, "cost_per_task_usd", ".4f"),
                "cost/correct USD": fmt(r["cost_per_correct_usd"], ".4f"),
                "cost total USD": fmt(r["cost_total_usd"], ".2f"),
                "actions mean (median)": f"{_with_ci(r, 'tool_actions_mean', '.1f')} "
                f"({fmt(r['tool_actions_median'], '.1f')})",
                "turns mean (median)": f"{fmt(r['model_turns_mean'], '.1f')} "
                f"({fmt(r['model_turns_median'], '.1f')})",
                "latency s mean (P90)": f"{_with_ci(r, 'latency_mean_s', '.1f')} "
                f"({fmt(r['latency_p90_s'], '.1f')})",
                "working s mean": fmt(r["working_mean_s"], ".1f"),
                "tokens K correct / incorrect": f"{_k(r['tokens_correct_mean'])} / "
                f"{_k(r['tokens_incorrect_mean'])}",
                "actions correct / incorrect": f"{fmt(r['tool_actions_correct_mean'], '.1f')} / "
                f"{fmt(r['tool_actions_incorrect_mean'], '.1f')}",
            }
        )
    return pd.DataFrame(rows)


EFFICIENCY_ACTIONS = (
    "actions mean (median)",
    "turns mean (median)",
    "latency s mean (P90)",
    "working s mean",
    "tokens K correct / incorrect",
    "actions correct / incorrect",
)
"""The extended efficiency columns shown in a second table (one table would not fit a
1,366-pixel screen)."""


def efficiency_tables(eff: Any) -> tuple[Any, Any]:
    """The extended efficiency table as two: tokens and cost, then actions and time."""
    full = efficiency_display(eff)
    if "agent" not in full.columns:  # no agent was measured
        return full, full
    actions = [c for c in EFFICIENCY_ACTIONS if c in full.columns]
    return full.drop(columns=actions), full[["agent", *actions]]


def pretty(column: str) -> str:
    """A display header for a machine column name.

    >>> pretty("accuracy_pct"), pretty("phase_agent_mean_s"), pretty("label")
    ('accuracy %', 'phase agent mean (s)', 'agent')
    """
    if column == "label":
        return "agent"
    for suffix, unit in (("_pct", " %"), ("_pp", " (points)"), ("_usd", " (USD)"), ("_s", " (s)")):
        if column.endswith(suffix):
            return column[: -len(suffix)].replace("_", " ") + unit
    return column.replace("_", " ")


CODE_MARKS = {
    "relation_mismatch": "R",
    "row_count_mismatch": "N",
    "column_count_mismatch": "C",
    "type_normalization_failed": "T",
    "invalid_prediction_csv": "I",
    "missing_prediction": "M",
    "infrastructure_error": "F",
}
CODE_LEGEND = (
    "R relation mismatch · N row count · C column count · T type normalization · "
    "I invalid CSV · M missing prediction · F infrastructure failure"
)


def _cells_html(cells: Sequence[AttemptCell]) -> str:
    out = []
    for c in cells:
        code = c.error_code or (c.status if c.status == "infrastructure_error" else None)
        if c.passed is True:
            cls, mark = "ok", "✓"
        elif c.passed is False:
            cls, mark = "bad", CODE_MARKS.get(str(code), "✗")
        else:
            cls, mark = "na", "·"
        tip = esc(f"attempt {c.attempt}: {c.status}" + (f", {code}" if code else ""))
        if c.href:
            out.append(
                f'<a class="att {cls}" href="{esc(c.href)}" title="{tip}">{c.attempt}{mark}</a>'
            )
        else:
            out.append(f'<span class="att {cls}" title="{tip}">{c.attempt}{mark}</span>')
    return " ".join(out)


def _per_task_html(data: ReportData) -> str:
    per = data.tables.get("per_task")
    if per is None or per.empty:
        return '<p class="muted">No attempts.</p>'
    head = "".join(f'<th class="agent">{esc(lab)}</th>' for lab in data.labels)
    rows = []
    questions = per["question"] if "question" in per.columns else [""] * len(per)
    traits = per["characteristics"] if "characteristics" in per.columns else [""] * len(per)
    for task, q, tr, solved in zip(
        per["task_id"], questions, traits, per["solved_by"], strict=True
    ):
        cells = "".join(
            f"<td>{_cells_html(data.cells.get((task, lab), ()))}</td>" for lab in data.labels
        )
        short = q if len(q) <= 140 else q[:139] + "…"
        rows.append(
            f'<tr><td class="task">{esc(task)}</td><td class="q" title="{esc(q)}">{esc(short)}'
            f'</td><td class="traits">{esc(tr)}</td><td class="n">{solved}</td>{cells}</tr>'
        )
    table = (
        f'<div class="wrap"><table id="per-task" class="sortable compact"><thead><tr>'
        f'<th>task</th><th>question</th><th>characteristics</th><th class="n">solved by</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )
    is_open = " open" if len(per) <= 60 else ""
    return (
        f"<details{is_open}><summary>{len(per)} tasks × {len(data.labels)} agents "
        f"(✓ correct; a letter marks an incorrect attempt by its error code: {CODE_LEGEND}; "
        f"a dot (·) an unscored attempt; each mark links to its trace)</summary>{table}</details>"
    )


def _failures_html(data: ReportData) -> str:
    fail = data.tables.get("failures")
    if fail is None or fail.empty:
        return '<p class="muted">No scored attempts.</p>'
    return (
        '<p class="muted">Incorrect attempts per agent by the evaluator\'s error code '
        "(infrastructure failures apart: the evaluator never saw them).</p>"
        + _table(data, "failures", fail.rename(columns={"label": "agent"}), {})
    )


def _figure(data: ReportData, name: str, caption: str) -> str:
    svg = data.figures.get(name)
    if not svg:
        return ""
    return f'<figure id="fig-{esc(name)}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def _table(data: ReportData, name: str, display: Any, formats: Mapping[str, Any]) -> str:
    link = data.table_hrefs.get(name)
    dl = f' <a class="muted" href="{esc(link)}">CSV</a>' if link else ""
    headers = {c: pretty(c) for c in display.columns if c not in data.labels}
    return table_html(display, table_id=f"t-{name}", formats=formats, headers=headers) + (
        f'<p class="muted">Download:{dl}</p>' if dl else ""
    )


_FIG_CAPTIONS = {
    "accuracy": "Task accuracy per agent (correct / scored attempts).",
    "pareto": "Accuracy against mean resource use per task; dashed lines connect "
    "Pareto-efficient agents (higher accuracy, lower use).",
    "spread": "Accuracy of each harness with the model fixed.",
    "gaps": "Accuracy of each group minus its characteristic's reference group, in points.",
    "passk": "pass@k per agent (unbiased estimator over the attempts of each task).",
}


HARNESS_NOTE = (
    "Each model run under two or more harnesses: accuracy, mean tokens per attempt, cost "
    "per task, mean latency (s) and how the attempts ended."
)
HARNESS_FORMATS = {
    "accuracy_pct": PCT,
    "input_tokens_mean": ".0f",
    "cached_input_tokens_mean": ".0f",
    "output_tokens_mean": ".0f",
    "reasoning_tokens_mean": ".0f",
    "cost_per_task_usd": ".4f",
    "latency_mean_s": ".1f",
}


def render_html(data: ReportData) -> str:
    """The whole report as one self-contained HTML page."""
    t = data.tables
    toc = [
        "accuracy",
        "pairwise",
        "failures",
        "efficiency",
        "timings",
        "pareto",
        "spread",
        "characteristics",
        "overlap",
        "pass-at-k",
        "unsolved",
        "tasks",
        "runs",
    ]
    sections: list[str] = []
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in data.notes)
    acc = t["accuracy"]
    sections.append('<h2 id="accuracy">Accuracy per agent</h2>')
    sections.append(
        f'<p class="muted">Intervals are {level_text(data.level)} (Wilson). Agents sharing a '
        "group letter are not told apart by the exact McNemar tests on their shared tasks, "
        'Holm-corrected across all pairs (see <a href="#pairwise">pairwise</a>).</p>'
    )
    sections.append(
        _table(
            data,
            "accuracy",
            accuracy_display(acc),
            {"accuracy %": PCT, "accuracy excl. infra %": PCT, "infra failure %": PCT},
        )
    )
    sections.append(_figure(data, "accuracy", _FIG_CAPTIONS["accuracy"]))
    sections.append(f'<h2 id="pairwise">Which differences are real ({level_text(data.level)})</h2>')
    sections.append(
        "<p class=\"muted\">Each cell: the row agent's accuracy minus the column agent's, in "
        "points, on the scored tasks both ran, with its paired-bootstrap interval; p is the "
        "exact McNemar test, Holm-corrected across all pairs; shaded cells differ.</p>"
    )
    sections.append(PAIRWISE_STYLE)
    sections.append(pairwise_matrix_html(t.get("pairwise"), data.labels, "t-pairwise-matrix"))
    pw = t.get("pairwise")
    if pw is not None and not pw.empty:
        sections.append(
            "<details><summary>every pair as a table</summary>"
            + _table(data, "pairwise", pw, {"p_mcnemar": ".3g", "p_holm": ".3g"})
            + "</details>"
        )
    sections.append('<h2 id="failures">Failures by error code</h2>')
    sections.append(_failures_html(data))
    sections.append('<h2 id="efficiency">Efficiency per agent</h2>')
    sections.append(
        '<p class="muted">As the paper prints it (Table 11): tokens are input + '
        "output per task in thousands, mean (median); latency mean (P90). The extended "
        "tables below give each mean with its interval.</p>"
    )
    sections.append(_table(data, "efficiency_paper", t["efficiency_paper"], {}))
    tokens, actions = efficiency_tables(t["efficiency"])
    sections.append("<h3>Extended: tokens and cost</h3>")
    sections.append(_table(data, "efficiency", tokens, {"accuracy %": PCT}))
    sections.append("<h3>Extended: actions and time</h3>")
    sections.append(_table(data, "efficiency_actions", actions, {}))
    sections.append('<h2 id="timings">Latency and phase timings (seconds)</h2>')
    tim = t["timings"].rename(columns={"label": "agent"})
    sections.append(_table(data, "timings", tim, dict.fromkeys(tim.columns[1:], ".2f")))
    sections.append('<h2 id="pareto">Accuracy–efficiency trade-offs</h2>')
    sections.append(
        _figure(data, "pareto", _FIG_CAPTIONS["pareto"])
        or '<p class="muted">No trade-off to plot: it takes two or more agents.</p>'
    )
    front = t["pareto"]
    if not front.empty:
        fr = (
            front[front["on_front"]]
            .groupby("axis", sort=False)["label"]
            .apply(lambda s: ", ".join(map(str, s)))
            .reset_index()
            .rename(columns={"axis": "resource", "label": "Pareto-efficient agents"})
        )
        sections.append(table_html(fr, table_id="t-pareto-front", sortable=False))
    sections.append('<h2 id="spread">Harness spread</h2>')
    spread = t["spread"]
    if spread.empty:
        sections.append(
            '<p class="muted">No model was run under two or more harnesses, '
            "and no harness under two or more models.</p>"
        )
    else:
        sections.append(
            _table(
                data,
                "spread",
                spread,
                {"best_accuracy_pct": PCT, "worst_accuracy_pct": PCT, "spread_pp": PCT},
            )
        )
        sections.append(_figure(data, "spread", _FIG_CAPTIONS["spread"]))
    harnesses = t.get("harnesses")
    if harnesses is not None and not harnesses.empty:
        sections.append('<h2 id="harnesses">Harnesses with the backbone fixed</h2>')
        sections.append(f'<p class="muted">{esc(HARNESS_NOTE)}</p>')
        sections.append(
            _table(
                data,
                "harnesses",
                harnesses,
                {**HARNESS_FORMATS, "accuracy_low_pct": PCT, "accuracy_high_pct": PCT},
            )
        )
        hp = t.get("harness_pairs")
        if hp is not None and not hp.empty:
            for model, grp in hp.groupby("model", sort=False):
                labs = list(harnesses[harnesses["model"] == model]["label"].astype(str))
                sections.append(f"<h3>{esc(model)}: which harness differences are real</h3>")
                sections.append(pairwise_matrix_html(grp, labs, f"t-harness-pairs-{model}"))
    sections.append('<h2 id="characteristics">Accuracy by task characteristic</h2>')
    wide = t["characteristics"]
    if wide.empty:
        sections.append(
            '<p class="muted">Left out: no task carries the annotations '
            "these breakdowns need (see the notes above).</p>"
        )
    else:
        sections.append(
            '<p class="muted">Accuracy (%) per group; N is the number of '
            "tasks in the group (the paper's Table 12).</p>"
        )
        long = t.get("characteristics_long")
        if long is not None and "accuracy_low_pct" in long.columns:
            wide = characteristics_display(long, data.labels)
        sections.append(_table(data, "characteristics", wide, dict.fromkeys(data.labels, ".1f")))
        sections.append(_figure(data, "gaps", _FIG_CAPTIONS["gaps"]))
    sections.append('<h2 id="overlap">Tasks solved by all, by none, and the oracle union</h2>')
    sections.append(_table(data, "overlap", t["overlap"], {"pct_of_tasks": PCT}))
    sections.append(_table(data, "overlap_agents", t["overlap_agents"], {}))
    sections.append('<h2 id="pass-at-k">pass@k</h2>')
    pk = t.get("pass_at_k")
    if pk is None or pk.empty:
        sections.append('<p class="muted">One attempt per task: pass@k equals accuracy.</p>')
    else:
        shown = pass_at_k_display(pk) if "pass@1_low_pct" in pk.columns else pk
        sections.append(
            f'<p class="muted">Unbiased estimators over each task\'s attempts (pass@k: at '
            "least one of k passes; pass^k: all k pass), with bootstrap intervals over tasks "
            f"({level_text(data.level)}).</p>"
        )
        sections.append(
            _table(data, "pass_at_k", shown, {c: PCT for c in shown.columns if c.endswith("_pct")})
        )
        sections.append(_figure(data, "passk", _FIG_CAPTIONS["passk"]))
        ag = t.get("attempt_agreement")
        if ag is not None and not ag.empty:
            sections.append("<h3>Agreement between attempts of one agent</h3>")
            sections.append(_table(data, "attempt_agreement", ag, {"disagree_pct": ".1f"}))
    sections.append('<h2 id="unsolved">Tasks no agent solved</h2>')
    sections.append(unsolved_html(t.get("unsolved"), data.cells, data.labels, data.review_url))
    sections.append('<h2 id="tasks">Per-task outcomes and traces</h2>')
    sections.append(_per_task_html(data))
    if t.get("estimates") is not None:
        sections.append('<h2 id="estimates">Estimate and actual</h2>')
        sections.append(
            estimates_html(
                t.get("estimates"),
                data.estimate_basis,
                lambda name, df, formats: _table(data, name, df, formats),
            )
        )
    sections.append(data.extra_html)
    sections.append('<h2 id="runs">Runs</h2>')
    sections.append(_runs_html(data.runs))
    nav = '<nav class="toc">' + "".join(f'<a href="#{s}">{s}</a>' for s in toc) + "</nav>"
    runs = ", ".join(str(r["run_id"]) for r in data.runs)
    header = (
        f'<header class="top"><h1>{esc(data.title)}</h1><div class="sub">runs: '
        f"{esc(runs)} · {len(data.labels)} agents · generated {esc(data.generated_at)}"
        "</div></header>"
    )
    return page(data.title, nav + notes + "".join(sections), header=header, script=True)


def _runs_html(runs: Sequence[Mapping[str, Any]]) -> str:
    import pandas as pd

    if not runs:
        return ""
    df = pd.DataFrame([{k: v for k, v in r.items() if k != "summary"} for r in runs])
    return table_html(
        df,
        table_id="t-runs",
        formats={"wall_seconds": ".1f"},
        headers={c: pretty(c) for c in df.columns},
    )


def _protocol_line(runs: Sequence[Mapping[str, Any]]) -> str:
    """The heading's protocol line: one profile, or each run's when they differ.

    >>> _protocol_line([{"run_id": "a", "protocol": "official"}])
    'Protocol: official.'
    >>> _protocol_line([{"run_id": "a"}, {"run_id": "b", "protocol": "extended"}])
    'Protocol: a official, b extended.'
    """
    names = [str(r.get("protocol") or "official") for r in runs]
    if len(set(names)) <= 1:
        return f"Protocol: {names[0] if names else 'official'}."
    return (
        "Protocol: "
        + ", ".join(f"{r['run_id']} {n}" for r, n in zip(runs, names, strict=True))
        + "."
    )


def render_markdown(data: ReportData) -> str:
    """The report as Markdown (figures linked as SVG files, tables inline)."""
    t = data.tables
    out = [
        f"# {data.title}",
        "",
        f"Runs: {', '.join(str(r['run_id']) for r in data.runs)}; "
        f"{len(data.labels)} agents; generated {data.generated_at}.",
        _protocol_line(data.runs),
        "",
    ]
    out += [f"> {n}" for n in data.notes]
    if data.notes:
        out.append("")

    def md(df: Any, formats: Mapping[str, Any] | None = None) -> str:
        headers = {c: pretty(c) for c in df.columns if c not in data.labels}
        return table_markdown(df, formats=formats, headers=headers)

    def fig(name: str) -> None:
        if name in data.figures and name in data.figure_hrefs:
            out.extend([f"![{_FIG_CAPTIONS.get(name, name)}]({data.figure_hrefs[name]})", ""])

    out += [
        "## Accuracy per agent",
        "",
        md(
            accuracy_display(t["accuracy"]),
            formats={"accuracy %": PCT, "accuracy excl. infra %": PCT, "infra failure %": PCT},
        ),
        "",
    ]
    fig("accuracy")
    out += markdown_sections(t, data.labels, data.level, data.estimate_basis)
    fail = t.get("failures")
    if fail is not None and not fail.empty:
        out += [
            "## Failures by error code",
            "",
            md(fail.rename(columns={"label": "agent"})),
            "",
        ]
    tokens, actions = efficiency_tables(t["efficiency"])
    out += [
        "## Efficiency per agent",
        "",
        "Tokens are input + output per task in thousands, mean (median); latency mean "
        "(P90), in seconds.",
        "",
        md(t["efficiency_paper"]),
        "",
        "### Extended: tokens and cost",
        "",
        md(tokens, formats={"accuracy %": PCT}),
        "",
        "### Extended: actions and time",
        "",
        md(actions),
        "",
        "## Latency and phase timings (seconds)",
        "",
        md(
            t["timings"].rename(columns={"label": "agent"}),
            formats=dict.fromkeys(t["timings"].columns[1:], ".2f"),
        ),
        "",
    ]
    out += ["## Accuracy–efficiency trade-offs", ""]
    fig("pareto")
    front = t["pareto"]
    if not front.empty:
        for axis, grp in front[front["on_front"]].groupby("axis", sort=False):
            out.append(f"- Pareto front, {axis}: {', '.join(map(str, grp['label']))}")
        out.append("")
    out += ["## Harness spread", ""]
    if t["spread"].empty:
        out += ["No model was run under two or more harnesses.", ""]
    else:
        out += [
            md(
                t["spread"],
                formats={"best_accuracy_pct": PCT, "worst_accuracy_pct": PCT, "spread_pp": PCT},
            ),
            "",
        ]
        fig("spread")
    harnesses = t.get("harnesses")
    if harnesses is not None and not harnesses.empty:
        out += ["## Harnesses with the backbone fixed", "", HARNESS_NOTE, ""]
        out += [md(harnesses, formats=HARNESS_FORMATS), ""]
    out += ["## Accuracy by task characteristic", ""]
    if t["characteristics"].empty:
        out += ["Left out: no task carries the annotations these breakdowns need.", ""]
    else:
        long = t.get("characteristics_long")
        wide = (
            characteristics_display(long, data.labels)
            if long is not None and "accuracy_low_pct" in long.columns
            else t["characteristics"]
        )
        out += [md(wide, formats=dict.fromkeys(data.labels, ".1f")), ""]
        fig("gaps")
    out += [
        "## Tasks solved by all, by none, and the oracle union",
        "",
        md(t["overlap"], formats={"pct_of_tasks": PCT}),
        "",
        md(t["overlap_agents"]),
        "",
    ]
    pk = t.get("pass_at_k")
    if pk is not None and not pk.empty:
        out += [
            "## pass@k",
            "",
            md(pass_at_k_display(pk) if "pass@1_low_pct" in pk.columns else pk),
            "",
        ]
        fig("passk")
    if data.table_hrefs:
        out += [
            "## Tables",
            "",
            *(f"- [{name}]({href})" for name, href in data.table_hrefs.items()),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


__all__ = [
    "AttemptCell",
    "ReportData",
    "accuracy_display",
    "efficiency_display",
    "efficiency_tables",
    "pretty",
    "render_html",
    "render_markdown",
]
