"""The full report of one run or several compared (``dataspace report``).

Output, under the output folder (by default the first run's folder)::

    report.html                        the self-contained report (figures inline)
    report.md                          the same as Markdown
    report/tables/<name>.csv|.parquet  every table
    report/figures/<name>.svg          every figure
    report/traces/<run>/<agent>/<task>-<n>.html   one trace page per attempt
                                                  (see ``dataspace.report.tracepages``)
"""

from __future__ import annotations

import io
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dataspace.errors import ConfigError, DataSpaceError
from dataspace.report.background import Background
from dataspace.report.comparisons import add_comparisons
from dataspace.report.load import (
    OutFolder,
    ReleaseMetadata,
    RunData,
    RunSource,
    check_same_release,
    combine,
    open_run,
    read_release_metadata,
    read_run,
    run_in_progress,
    task_metadata,
)
from dataspace.report.render import ReportData, render_html, render_markdown
from dataspace.report.tracepages import start_trace_pages, trace_mode
from dataspace.stats import DEFAULT_LEVEL, check_level

logger = logging.getLogger(__name__)

HTML_NAME = "report.html"
MARKDOWN_NAME = "report.md"
ASSETS = "report"
BACKGROUND_FIGURES = ("pareto", "passk", "gaps")
"""Figures drawn in a forked process while the comparisons and the other figures are computed
(the heaviest, about half of the work on a large run)."""


@dataclass(frozen=True, kw_only=True)
class ReportOutput:
    """What ``build_report`` wrote.

    Attributes:
        out: URI of the output folder.
        html: URI of ``report.html``.
        markdown: URI of ``report.md``.
        tables: table name -> URI of its CSV (a Parquet file sits beside it).
        figures: figure name -> URI of its SVG.
        traces: how many trace pages were written now.
        traces_kept: trace pages that existed already and were kept.
        notes: the remarks the report shows (missing metadata, failures, conventions).
        data: table name -> DataFrame, as written.
        seconds: time taken.
    """

    out: str
    html: str
    markdown: str
    tables: Mapping[str, str]
    figures: Mapping[str, str]
    traces: int
    traces_kept: int
    notes: tuple[str, ...]
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)
    seconds: float = 0.0


def build_report(
    runs: Sequence[str],
    *,
    out: str | None = None,
    release: str | None = None,
    traces: str | bool = "new",
    allow_mixed: bool = False,
    level: float = DEFAULT_LEVEL,
    review_url: str | None = None,
) -> ReportOutput:
    """Build the report of one run, or of several compared.

    Args:
        runs: run folders as store URIs (``file:///x/store/runs/demo``,
            ``s3://bucket/prefix/runs/demo``) or local paths.
        out: the output folder (URI or path); defaults to the first run's folder.
        release: a release folder (path or URI) whose ``metadata/`` annotations are used for
            the breakdowns by task characteristic (overriding what the results carry).
        traces: trace pages per attempt: ``new`` (default) writes the pages that do not
            exist yet (attempts never change once finished), ``all`` rewrites every page,
            ``none`` writes none (True and False mean ``new`` and ``none``).
        allow_mixed: compare runs made on different releases (the report says so at
            its top); by default they are refused.
        level: the confidence level of every interval and test (default 0.95).
        review_url: the review console's address; the tasks no agent solved link to it.

    Raises:
        ConfigError: no run given, a level outside (0, 1), a run folder without a
            readable results file, or runs of different releases without ``allow_mixed``.
    """
    from dataspace.store import open_store
    from dataspace.store.uris import uri_scheme

    if not runs:
        raise ConfigError("no run given: name at least one run folder (<store>/runs/<id>)")
    sources = [open_run(uri) for uri in runs]
    target = out or runs[0]
    # the report is derived and rebuilt at will: skip per-file fsync on local disks
    options = {"fsync": False} if uri_scheme(target) == "file" else {}
    out_store = open_store(target, **options)
    return build_from_sources(
        sources,
        out_store=out_store,
        out_prefix="",
        release=release,
        traces=traces,
        allow_mixed=allow_mixed,
        level=level,
        review_url=review_url,
    )


def build_from_sources(
    sources: Sequence[RunSource],
    *,
    out_store: Any,
    out_prefix: str = "",
    release: str | None = None,
    traces: str | bool = "new",
    allow_mixed: bool = False,
    level: float = DEFAULT_LEVEL,
    review_url: str | None = None,
) -> ReportOutput:
    """``build_report`` over already opened stores (the run command uses this)."""
    t0 = time.perf_counter()
    mode = trace_mode(traces)
    try:
        level = check_level(level)
    except ValueError as exc:
        raise ConfigError(f"--level: {exc}") from None
    runs = [read_run(s) for s in sources]
    mixed = check_same_release(runs, allow_mixed=allow_mixed)
    rel = read_release_metadata(release) if release else None
    df = combine(runs, rel)
    notes = _notes(runs, df, rel, release)
    if mixed:
        notes.insert(0, mixed)
    out = OutFolder(store=out_store, prefix=out_prefix)
    # trace pages are written in the background while the tables and figures are drawn
    pending = start_trace_pages(runs, df, out, mode=mode, report_key=HTML_NAME)
    try:
        data, figures, grouping_notes = _compute(df, _questions(runs, release, df), level)
        notes += grouping_notes
        estimates = _estimates(runs, df)
        if not estimates.empty:
            data["estimates"] = estimates
        table_uris, table_hrefs = _write_tables(out, data)
        figure_uris, figure_hrefs = {}, {}
        for name, svg in figures.items():
            key = f"{ASSETS}/figures/{name}.svg"
            out.put(key, _standalone_svg(svg))
            figure_uris[name], figure_hrefs[name] = out.url(key), key
    finally:
        pages = pending.wait()
    notes += pages.notes
    title = "DataSpace report: " + ", ".join(r.run_id for r in runs)
    report = ReportData(
        title=title,
        runs=[_run_info(r, df) for r in runs],
        labels=list(data["accuracy"]["label"]) if not df.empty else [],
        tables=data,
        figures=figures,
        notes=notes,
        cells=pages.cells,
        figure_hrefs=figure_hrefs,
        table_hrefs=table_hrefs,
        generated_at=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        extra_html=_audit_html(sources),
        level=level,
        review_url=review_url,
        estimate_basis=_estimate_basis(sources),
    )
    out.put(HTML_NAME, render_html(report).encode())
    out.put(MARKDOWN_NAME, render_markdown(report).encode())
    seconds = time.perf_counter() - t0
    logger.info(
        "report of %s written to %s in %.2f s (%d trace pages written, %d kept)",
        ", ".join(r.run_id for r in runs),
        out.url(HTML_NAME),
        seconds,
        pages.written,
        pages.kept,
    )
    return ReportOutput(
        out=out.url(""),
        html=out.url(HTML_NAME),
        markdown=out.url(MARKDOWN_NAME),
        tables=table_uris,
        figures=figure_uris,
        traces=pages.written,
        traces_kept=pages.kept,
        notes=tuple(notes),
        data=data,
        seconds=seconds,
    )


def _audit_html(sources: Sequence[RunSource]) -> str:
    from dataspace.report.audit import audit_section_html, read_audits

    return audit_section_html([doc for s in sources for doc in read_audits(s)])


def _empty_tables() -> dict[str, Any]:
    import pandas as pd

    return {
        name: pd.DataFrame()
        for name in (
            "accuracy",
            "efficiency",
            "efficiency_paper",
            "timings",
            "characteristics",
            "characteristics_long",
            "overlap",
            "overlap_agents",
            "spread",
            "pareto",
            "failures",
            "per_task",
            "pairwise",
            "unsolved",
        )
    }


def _traits(md: Mapping[str, Any]) -> str:
    """A task's characteristics in a few words, from its metadata.

    >>> _traits({"modalities_required": ["csv", "pdf"], "operations": ["join"],
    ...          "languages": {"question": "zh", "workspace": "en"}})
    'csv+pdf · join · zh/en'
    """
    bits = []
    mods = md.get("modalities_required") or md.get("modalities_present")
    if isinstance(mods, list | tuple) and mods:
        bits.append("+".join(map(str, mods)))
    ops = md.get("operations")
    if isinstance(ops, Mapping):
        ops = [k for k, v in ops.items() if v]
    if isinstance(ops, list | tuple) and ops:
        bits.append(", ".join(map(str, ops)))
    langs = md.get("languages")
    if isinstance(langs, Mapping) and langs.get("question"):
        bits.append(f"{langs.get('question')}/{langs.get('workspace') or '?'}")
    if md.get("order_sensitive") is True:
        bits.append("ordered")
    return " · ".join(bits)


def _questions(runs: Sequence[RunData], release: str | None, df: Any) -> dict[str, str]:
    """Each task's question, from the release given or the runs' own (``spec.json``)."""
    import json as _json

    from dataspace.release import Release

    roots: list[str] = [release] if release else []
    for r in runs:
        try:
            doc = _json.loads(r.source.store.get_bytes(r.source.key("spec.json")))
        except (DataSpaceError, ValueError, OSError):
            continue
        root = (doc.get("spec") or {}).get("release") if isinstance(doc, dict) else None
        if isinstance(root, str) and root not in roots:
            roots.append(root)
    out: dict[str, str] = {}
    tasks = sorted(set(map(str, df["task_id"]))) if not df.empty else []
    for root in roots:
        try:
            rel = Release(root)
        except (DataSpaceError, OSError):
            continue
        for t in tasks:
            if t not in out:
                try:
                    out[t] = rel.task(t).question
                except (DataSpaceError, OSError):
                    continue
    return out


def _compute(
    df: Any, questions: Mapping[str, str] | None = None, level: float = DEFAULT_LEVEL
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    from dataspace.report import plots, tables
    from dataspace.report.characteristics import assign_groups

    if df.empty:
        return _empty_tables(), {}, []
    notes: list[str] = []
    acc = tables.accuracy_table(df)
    labels = tables.labels_in_order(acc)
    eff = tables.efficiency_table(df, acc)
    meta = task_metadata(df)
    grouping = assign_groups(meta)
    annotated = tables.metadata_counts(meta)
    if annotated == 0:
        notes.append(
            "No task metadata (the official release carries none): the breakdowns "
            "by task characteristic are left out. Pass a release built with "
            "annotations (--release) to include them."
        )
    else:
        for name in grouping.left_out:
            notes.append(
                f"{name}: left out of the breakdowns, no task carries the annotation it needs."
            )
        for name, n in grouping.missing.items():
            if n:
                notes.append(
                    f"{name}: {n} of {len(meta)} tasks lack the annotation and are "
                    "left out of this breakdown."
                )
    long = tables.characteristics_table(df, grouping, labels)
    overlap = tables.overlap_tables(df, labels)
    # comparisons across agents only on the tasks every agent attempted
    common, per_label = tables.common_tasks(df)
    acc_cmp, eff_cmp = acc, eff
    if len(set(per_label.values())) > 1 or any(n != len(common) for n in per_label.values()):
        sizes = ", ".join(f"{k}: {n}" for k, n in per_label.items())
        notes.append(
            f"The agents were run on different task sets ({sizes} tasks); the harness "
            f"spread and the Pareto comparison use only the {len(common)} tasks common to "
            "all of them. Accuracy and efficiency per agent are over each agent's own tasks."
        )
        sub = df[df["task_id"].astype(str).isin(common)]
        if not sub.empty:
            acc_cmp = tables.accuracy_table(sub)
            eff_cmp = tables.efficiency_table(sub, acc_cmp)
    pareto = tables.pareto_table(eff_cmp)
    per_task = tables.per_task_table(df, labels)
    per_task.insert(
        1, "question", [str((questions or {}).get(t) or "") for t in per_task["task_id"]]
    )
    per_task.insert(2, "characteristics", [_traits(meta.get(t) or {}) for t in per_task["task_id"]])
    data = {
        "accuracy": acc,
        "efficiency": eff,
        "efficiency_paper": tables.paper_efficiency_table(eff),
        "timings": tables.timings_table(df, acc),
        "characteristics": tables.characteristics_wide(long, labels),
        "characteristics_long": long,
        "overlap": overlap.summary,
        "overlap_agents": overlap.per_agent,
        "spread": tables.spread_table(acc_cmp),
        "pareto": pareto,
        "failures": tables.failures_table(df, labels),
        "per_task": per_task,
    }
    from dataspace.report.harnesses import harness_comparison_table

    harnesses = harness_comparison_table(acc, eff)
    if not harnesses.empty:  # only when some model ran under two or more harnesses
        data["harnesses"] = harnesses
    pk = tables.pass_at_k_table(df, labels)
    if pk is not None:
        data["pass_at_k"] = pk
    figures: dict[str, str] = {}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        notes += add_comparisons(data, df, labels, level)
        notes.append("Figures left out: matplotlib is not installed (pip install matplotlib).")
        return data, figures, notes
    several = len(labels) >= 2  # a comparison of one agent with itself means nothing
    draw = {
        "accuracy": lambda: plots.accuracy_figure(acc),
        "pareto": lambda: plots.pareto_figure(pareto, labels) if several else None,
        "spread": lambda: plots.spread_figure(acc_cmp) if several else None,
        "gaps": lambda: plots.gap_figure(long, labels),
        "passk": lambda: plots.pass_at_k_figure(pk, labels),
    }
    # the figures draw from the frames as they are before the comparisons are added; the
    # heaviest are drawn on another core meanwhile, by a child that inherits matplotlib
    plots.import_drawing()
    elsewhere = Background({k: draw[k] for k in BACKGROUND_FIGURES})
    notes += add_comparisons(data, df, labels, level)
    drawn = {k: f() for k, f in draw.items() if k not in BACKGROUND_FIGURES}
    drawn.update(elsewhere.results())
    for name in draw:
        if drawn.get(name):
            figures[name] = drawn[name]
    return data, figures, notes


def _estimates(runs: Sequence[RunData], df: Any) -> Any:
    """Each run's recorded plan (``plan.json``) beside what its attempts actually used."""
    from dataspace.report.estimates import estimate_vs_actual

    return estimate_vs_actual([(r.source, r.summary or {}) for r in runs], df)


def _estimate_basis(sources: Sequence[RunSource]) -> list[str]:
    from dataspace.report.estimates import basis_lines

    return basis_lines(sources)


def _summary_notes(run: RunData) -> list[str]:
    """What a run's summary says about its state: in progress, stopped, failures by cause."""
    s = run.summary or {}
    out: list[str] = []
    if s.get("partial"):
        how = "was interrupted" if s.get("interrupted") else _running(s)
        out.append(
            f"Run {run.run_id} {how}: partial results ({s.get('finished', '?')} of "
            f"{s.get('attempts', '?')} attempts finished); rerun the report when it ends."
        )
    if s.get("stopped_for_spend_limit"):
        from dataspace.llm.usage import format_usd

        limit = float(s.get("spend_limit_usd") or 0.0)
        spent = sum(
            float(a.get("cost_usd") or 0.0)
            for a in (s.get("agents") or {}).values()
            if isinstance(a, dict)
        )
        out.append(
            f"Run {run.run_id} stopped scheduling at its spend limit of {format_usd(limit)} "
            f"({format_usd(spent)} spent)."
        )
    for name, a in (s.get("agents") or {}).items():
        if isinstance(a, dict) and a.get("stopped"):
            out.append(f"Run {run.run_id}: agent {name} was stopped: {a['stopped']}.")
    for c in s.get("infra_by_cause") or []:
        out.append(
            f"Run {run.run_id}: infrastructure failures of {c['agent']}: {c['code']} "
            f"x{c['tries']} ({c['attempts']} attempts): {str(c['error'])[:200]}"
        )
    return out


def _running(summary: Mapping[str, Any]) -> str:
    """How a run whose last summary is partial stands: running, or silent for a while."""
    from dataspace.runs.controller import STATUS_INTERVAL

    updated = summary.get("updated_at")
    if not isinstance(updated, int | float):
        return "is running"
    age = max(0.0, time.time() - float(updated))
    if age <= 10 * STATUS_INTERVAL:
        return "is running"
    return (
        f"is running or stopped without a word (its results were last written {age:.0f} s "
        "ago; if no `dataspace run` is going, rerun it to resume)"
    )


def _notes(
    runs: Sequence[RunData], df: Any, rel: ReleaseMetadata | None, release: str | None
) -> list[str]:
    from dataspace.report.tables import INFRA_STATUS, NOT_SCHEDULED

    notes: list[str] = [n for r in runs for n in _summary_notes(r)]
    if df.empty:
        return [*notes, "The runs hold no attempts."]
    for r in runs:
        notes.append(f"Run {r.run_id}: {_describe_tasks(df[df['run_id'] == r.run_id])}.")
    if rel is not None:
        notes.extend(rel.problems)
        if not rel.tasks:
            notes.append(f"{release}: the release has no metadata/ annotations.")
    status = df["status"]
    n_infra = int((status == INFRA_STATUS).sum())
    if n_infra:
        notes.append(
            f"{n_infra} attempt(s) ended in infrastructure failures after their "
            "retries: they count as incorrect in accuracy (the official convention), "
            "are shown apart with the accuracy without them, and are left out of "
            "efficiency."
        )
    running = [r.run_id for r in runs if run_in_progress(r.summary)]
    waiting = status == NOT_SCHEDULED
    n_running = int((waiting & df["run_id"].isin(running)).sum())
    n_ns = int(waiting.sum()) - n_running
    if n_running:
        notes.append(
            f"{n_running} attempt(s) have no result yet (their run is running): they are "
            "left out of accuracy and efficiency."
        )
    if n_ns:
        notes.append(
            f"{n_ns} attempt(s) were never scheduled (a spend limit, an agent stopped after "
            "infrastructure failures, or an interruption): they are left out of accuracy and "
            "efficiency."
        )
    n_unscored = int((df["passed"].isna() & ~status.isin([NOT_SCHEDULED])).sum())
    if n_unscored:
        notes.append(
            f"{n_unscored} attempt(s) are unscored (their tasks have no gold answer and "
            "no config): they are left out of accuracy, whose denominator is the scored "
            "tasks, as the official evaluator counts."
        )
    if int(df["attempt"].max()) > 1:
        notes.append(
            "Several attempts per task: accuracy is the mean over attempts (pass@1); "
            "a task counts as solved by an agent in the overlap when any attempt "
            "passed."
        )
    return notes


def _unscored_tasks(df: Any) -> set[str]:
    """Tasks without gold: rows say ``scored: false`` (older results: no verdict at all)."""
    from dataspace.report.tables import NOT_SCHEDULED

    if "scored" in df.columns and df["scored"].notna().any():
        unscored_rows = (df["scored"].astype("boolean") == False).fillna(False)  # noqa: E712
        return {str(t) for t in df.loc[unscored_rows.astype(bool), "task_id"]}
    unscored = df["passed"].isna() & (df["status"] != NOT_SCHEDULED)
    by_task = unscored.groupby(df["task_id"]).all()
    return {str(t) for t, u in by_task.items() if u}


def _describe_tasks(df: Any) -> str:
    """``N scored of M tasks, K unscored (no gold)`` for one run's rows."""
    from dataspace.release import describe_counts

    tasks = int(df["task_id"].nunique())
    return describe_counts(tasks - len(_unscored_tasks(df)), tasks)


def _run_info(run: RunData, df: Any) -> dict[str, Any]:
    mine = df[df["run_id"] == run.run_id] if not df.empty else df
    s = run.summary or {}
    tasks = int(mine["task_id"].nunique()) if len(mine) else 0
    unscored = len(_unscored_tasks(mine)) if len(mine) else 0
    return {
        "run_id": run.run_id,
        "uri": run.source.uri,
        "tasks": tasks,
        "scored_tasks": tasks - unscored,
        "unscored_tasks": unscored,
        "attempts": len(mine),
        "agents": ", ".join(sorted(map(str, mine["agent"].unique()))) if len(mine) else "",
        "wall_seconds": s.get("wall_seconds"),
        "protocol": s.get("protocol") or "official",
        "stopped_for_spend_limit": bool(s.get("stopped_for_spend_limit", False)),
    }


def _standalone_svg(svg: str) -> bytes:
    return ('<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + svg).encode()


def _parquet_safe(df: Any) -> Any:
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object:
            out[c] = [
                None
                if (isinstance(v, float) and math.isnan(v))
                else (v if v is None or isinstance(v, str | bool | int | float) else str(v))
                for v in out[c]
            ]
    out.columns = [str(c) for c in out.columns]
    return out


def _write_tables(out: OutFolder, data: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    uris, hrefs = {}, {}
    for name, df in data.items():
        base = f"{ASSETS}/tables/{name}"
        out.put(f"{base}.csv", df.to_csv(index=False).encode())
        buf = io.BytesIO()
        _parquet_safe(df).to_parquet(buf, index=False)
        out.put(f"{base}.parquet", buf.getvalue())
        uris[name], hrefs[name] = out.url(f"{base}.csv"), f"{base}.csv"
    return uris, hrefs


__all__ = ["ASSETS", "ReportOutput", "build_from_sources", "build_report"]
