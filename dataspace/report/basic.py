"""The report written at the end of ``dataspace run``.

``write_basic_report`` writes the full report (``dataspace.report.build``, rendered by
``dataspace.report.render``) when the run's results file is there and the plotting
dependency is installed; otherwise it falls back to the summary page below (accuracy per
agent and counts by status, from the run summary alone).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)


def summary_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per agent: accuracy, passed/scored, attempts, status counts.

    >>> summary_rows({"agents": {"gold": {"harness": "gold", "model": None, "attempts": 2,
    ...     "scored": 2, "passed": 2, "accuracy": 1.0, "status_counts": {"submitted": 2},
    ...     "infra_retried_attempts": 0, "cost_usd": 0.0}}})[0]["accuracy_pct"]
    '100.00'
    """
    out = []
    for name, a in summary["agents"].items():
        acc = a.get("accuracy")
        out.append(
            {
                "agent": name,
                "harness": a["harness"],
                "model": a.get("model") or "-",
                "accuracy_pct": "-" if acc is None else f"{100 * acc:.2f}",
                "passed": a["passed"],
                "scored": a["scored"],
                "attempts": a["attempts"],
                "infra_retried": a.get("infra_retried_attempts", 0),
                "cost_usd": f"{a.get('cost_usd', 0.0):.4f}",
                "status_counts": a["status_counts"],
            }
        )
    return out


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """The fallback report as Markdown."""
    rows = summary_rows(summary)
    lines = [
        f"# Run `{summary['run_id']}`",
        "",
        f"{summary['attempts']} attempts; wall time {summary['wall_seconds']:.1f} s."
        + _counts(summary),
        f"Protocol: {summary.get('protocol') or 'official'}.",
        "",
        "## Accuracy per agent",
        "",
        "| agent | harness | model | accuracy % | passed | scored | attempts | "
        "infra-retried | cost USD |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['agent']} | {r['harness']} | {r['model']} | {r['accuracy_pct']} | "
            f"{r['passed']} | {r['scored']} | {r['attempts']} | {r['infra_retried']} | "
            f"{r['cost_usd']} |"
        )
    statuses = sorted({s for r in rows for s in r["status_counts"]})
    lines += [
        "",
        "## Attempts by status",
        "",
        "| agent | " + " | ".join(statuses) + " |",
        "|---|" + "---:|" * len(statuses),
    ]
    for r in rows:
        lines.append(
            f"| {r['agent']} | "
            + " | ".join(str(r["status_counts"].get(s, 0)) for s in statuses)
            + " |"
        )
    if summary.get("stopped_for_spend_limit"):
        lines += [
            "",
            f"**Stopped scheduling at the spend limit of {_usd(summary['spend_limit_usd'])}.**",
        ]
    return "\n".join(lines) + "\n"


def _usd(amount: Any) -> str:
    from dataspace.llm.usage import format_usd

    return format_usd(float(amount or 0.0))


def summary_page(summary: Mapping[str, Any]) -> str:
    """The fallback report as a self-contained HTML page."""
    rows = summary_rows(summary)
    esc = html.escape
    statuses = sorted({s for r in rows for s in r["status_counts"]})
    acc_rows = "".join(
        f"<tr><td>{esc(r['agent'])}</td><td>{esc(r['harness'])}</td><td>{esc(r['model'])}</td>"
        f"<td class=n>{r['accuracy_pct']}</td><td class=n>{r['passed']}</td>"
        f"<td class=n>{r['scored']}</td><td class=n>{r['attempts']}</td>"
        f"<td class=n>{r['infra_retried']}</td><td class=n>{r['cost_usd']}</td></tr>"
        for r in rows
    )
    st_rows = "".join(
        f"<tr><td>{esc(r['agent'])}</td>"
        + "".join(f"<td class=n>{r['status_counts'].get(s, 0)}</td>" for s in statuses)
        + "</tr>"
        for r in rows
    )
    counts = esc(_counts(summary))
    spend = ""
    if summary.get("stopped_for_spend_limit"):
        spend = (
            f"<p class=warn>Stopped scheduling at the spend limit of "
            f"{esc(_usd(summary['spend_limit_usd']))}.</p>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>DataSpace run {esc(summary["run_id"])}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px}}
th{{background:#f3f3f3}}.n{{text-align:right;font-variant-numeric:tabular-nums}}
.warn{{color:#a00;font-weight:bold}}</style></head><body>
<h1>Run <code>{esc(summary["run_id"])}</code></h1>
<p>{summary["attempts"]} attempts; wall time {summary["wall_seconds"]:.1f} s.{counts}</p>
<p>Protocol: {esc(str(summary.get("protocol") or "official"))}.</p>{spend}
<h2>Accuracy per agent</h2>
<table id="accuracy"><tr><th>agent</th><th>harness</th><th>model</th><th>accuracy %</th>
<th>passed</th><th>scored</th><th>attempts</th><th>infra-retried</th><th>cost USD</th></tr>
{acc_rows}</table>
<h2>Attempts by status</h2>
<table id="status"><tr><th>agent</th>{"".join(f"<th>{esc(s)}</th>" for s in statuses)}</tr>
{st_rows}</table>
</body></html>
"""


def _counts(summary: Mapping[str, Any]) -> str:
    """`` N scored of M tasks, K unscored (no gold).`` when the summary counts tasks."""
    from dataspace.release import describe_counts

    if "tasks" not in summary:
        return ""
    return f" {describe_counts(summary['scored_tasks'], summary['tasks'])}."


def write_basic_report(store: Any, run_prefix: str, summary: Mapping[str, Any]) -> list[str]:
    """Write ``report.md`` and ``report.html`` next to the run; returns their URIs.

    Args:
        store: the run's store.
        run_prefix: the run folder's key prefix (``runs/<run_id>``).
        summary: the run summary (used by the fallback page).
    """
    from dataspace.errors import ConfigError

    md_key, html_key = f"{run_prefix}/report.md", f"{run_prefix}/report.html"
    try:
        from dataspace.report.build import build_from_sources
        from dataspace.report.load import RunSource

        out = build_from_sources(
            [RunSource(store=store, prefix=run_prefix)],
            out_store=derived_store(store),
            out_prefix=run_prefix,
        )
        return [out.markdown, out.html]
    except ImportError as exc:
        logger.warning("full report unavailable (%s); writing the basic report", exc)
    except ConfigError as exc:
        logger.warning("full report unavailable (%s); writing the basic report", exc)
    store.put_bytes(md_key, summary_markdown(summary).encode())
    store.put_bytes(html_key, summary_page(summary).encode())
    return [store.url_for(md_key), store.url_for(html_key)]


def derived_store(store: Any) -> Any:
    """The same folder without per-file fsync: the report is derived and rebuilt at will."""
    import dataclasses

    from dataspace.store.local import FileStore

    if isinstance(store, FileStore) and store.options.fsync:
        return FileStore(store.root, options=dataclasses.replace(store.options, fsync=False))
    return store


def write_finished_page(store: Any, run_prefix: str, row: Mapping[str, Any]) -> None:
    """Write a finished attempt's page where the run's report goes (the run's folder).

    What ``dataspace run`` hands the run controller (``execute_run(on_finished=...)``).

    Raises:
        StoreError: the page could not be read or written.
    """
    from dataspace.report.build import HTML_NAME
    from dataspace.report.load import OutFolder, RunSource
    from dataspace.report.tracepages import write_attempt_page

    write_attempt_page(
        RunSource(store=store, prefix=run_prefix),
        OutFolder(store=derived_store(store), prefix=run_prefix),
        row,
        report_key=HTML_NAME,
    )


__all__ = [
    "derived_store",
    "summary_markdown",
    "summary_page",
    "summary_rows",
    "write_basic_report",
    "write_finished_page",
]
