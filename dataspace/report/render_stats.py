"""The report's sections on uncertainty: the pairwise matrix, unsolved tasks, estimates.

HTML and Markdown for the tables ``dataspace.report.comparisons`` and
``dataspace.report.estimates`` add, and the ``estimate [low, high]`` cell format used by
every table that shows an interval.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dataspace.report.page import esc, is_missing, table_markdown

logger = logging.getLogger(__name__)


def ci(est: Any, low: Any, high: Any, spec: str = ".1f", scale: float = 1.0) -> str:
    """``estimate [low, high]``; the estimate alone when the bounds are missing.

    >>> ci(66.341, 61.63, 70.75, ".2f")
    '66.34 [61.63, 70.75]'
    >>> ci(0.5, float("nan"), float("nan"))
    '0.5'
    >>> ci(None, None, None)
    '-'
    """
    if is_missing(est):
        return "-"
    text = format(float(est) * scale, spec)
    if is_missing(low) or is_missing(high):
        return text
    return f"{text} [{format(float(low) * scale, spec)}, {format(float(high) * scale, spec)}]"


def level_text(level: float) -> str:
    """``95%`` for 0.95.

    >>> level_text(0.9)
    '90%'
    """
    return f"{100 * level:g}%"


def pass_at_k_display(pk: Any) -> Any:
    """pass@k and pass^k per agent as ``estimate [low, high]`` cells, one column per k."""
    import pandas as pd

    ks = sorted(
        int(c[len("pass@") : -len("_pct")])
        for c in pk.columns
        if c.startswith("pass@") and c.endswith("_pct") and "_low" not in c and "_high" not in c
    )
    rows = []
    for r in pk.to_dict("records"):
        row: dict[str, Any] = {"agent": r["label"], "tasks": r["tasks"]}
        for k in ks:
            row[f"pass@{k} %"] = ci(
                r[f"pass@{k}_pct"], r[f"pass@{k}_low_pct"], r[f"pass@{k}_high_pct"]
            )
        for k in ks[1:]:
            row[f"pass^{k} %"] = ci(
                r[f"pass^{k}_pct"], r[f"pass^{k}_low_pct"], r[f"pass^{k}_high_pct"]
            )
        rows.append(row)
    return pd.DataFrame(rows)


def characteristics_display(long: Any, labels: Sequence[str]) -> Any:
    """Table 12's shape with ``accuracy [low, high]`` cells."""
    import pandas as pd

    if long.empty:
        return pd.DataFrame(columns=["characteristic", "group", "N", *labels])
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in long.to_dict("records"):
        key = (r["characteristic"], r["group"])
        row = rows.setdefault(
            key, {"characteristic": key[0], "group": key[1], "N": int(r["n_tasks"])}
        )
        row[str(r["label"])] = ci(
            r["accuracy_pct"], r.get("accuracy_low_pct"), r.get("accuracy_high_pct")
        )
    return pd.DataFrame(list(rows.values()), columns=["characteristic", "group", "N", *labels])


def _pair_cell(r: Mapping[str, Any], flip: bool) -> tuple[str, str]:
    sign = -1.0 if flip else 1.0
    lo, hi = r["difference_low_pp"], r["difference_high_pp"]
    if flip:
        lo, hi = -hi, -lo
    diff = sign * float(r["difference_pp"]) if not is_missing(r["difference_pp"]) else math.nan
    if math.isnan(diff):
        return "na", "no shared task"
    text = (
        f"{diff:+.1f} [{lo:+.1f}, {hi:+.1f}]<br>p={float(r['p_holm']):.2g} · "
        f"{int(r['shared_tasks'])} tasks"
    )
    return ("diff" if bool(r["different"]) else "same"), text


def pairwise_matrix_html(pairs: Any, labels: Sequence[str], table_id: str) -> str:
    """Agents x agents: row minus column in points, its interval, the Holm-adjusted p."""
    if pairs is None or pairs.empty:
        return '<p class="muted">It takes two or more agents.</p>'
    by = {(str(r["a"]), str(r["b"])): r for r in pairs.to_dict("records")}
    head = "".join(f'<th class="pm">{esc(lab)}</th>' for lab in labels)
    body = []
    for x in labels:
        cells = []
        for y in labels:
            if x == y:
                cells.append('<td class="pm self">·</td>')
                continue
            r, flip = (by.get((x, y)), False) if (x, y) in by else (by.get((y, x)), True)
            if r is None:
                cells.append('<td class="pm na">-</td>')
                continue
            cls, text = _pair_cell(r, flip)
            cells.append(f'<td class="pm {cls}">{text}</td>')
        body.append(f'<tr><th class="pm row">{esc(x)}</th>{"".join(cells)}</tr>')
    return (
        f'<div class="wrap"><table id="{esc(table_id)}" class="pairwise"><thead><tr>'
        f'<th class="pm">row − column</th>{head}</tr></thead><tbody>{"".join(body)}'
        "</tbody></table></div>"
    )


PAIRWISE_STYLE = (
    "<style>table.pairwise{table-layout:fixed;width:100%;max-width:100%}"
    "table.pairwise td.pm,table.pairwise th.pm{font-size:.78em;overflow-wrap:anywhere;"
    "text-align:center}table.pairwise td.diff{background:#e6f4ea}"
    "table.pairwise td.same{color:#5f6b76}table.pairwise td.self{background:#f2f4f7}"
    "table.pairwise th.row{text-align:left}</style>"
)


def pairwise_display(pairs: Any) -> Any:
    """The pairs as a flat table (Markdown)."""
    import pandas as pd

    rows = []
    for r in pairs.to_dict("records"):
        rows.append(
            {
                **({"model": r["model"]} if "model" in r else {}),
                "a": r["a"],
                "b": r["b"],
                "shared tasks": r["shared_tasks"],
                "a − b (points)": ci(
                    r["difference_pp"], r["difference_low_pp"], r["difference_high_pp"], "+.1f"
                ),
                "only a / only b": f"{r['a_only']} / {r['b_only']}",
                "McNemar p": f"{float(r['p_mcnemar']):.3g}",
                "Holm p": f"{float(r['p_holm']):.3g}",
                "differ": "yes" if bool(r["different"]) else "no",
            }
        )
    return pd.DataFrame(rows)


def unsolved_html(
    unsolved: Any,
    cells: Mapping[tuple[str, str], Sequence[Any]],
    labels: Sequence[str],
    review_url: str | None,
) -> str:
    """The scored tasks no agent solved, each with its attempts' traces and a review link."""
    if unsolved is None or unsolved.empty:
        return '<p class="muted">Every scored task was solved by at least one agent.</p>'
    items = []
    for task, tried in zip(unsolved["task_id"], unsolved["agents_tried"], strict=True):
        links = []
        for lab in labels:
            for c in cells.get((str(task), lab), ()):
                if c.href:
                    links.append(
                        f'<a href="{esc(c.href)}" title="{esc(lab)} attempt {c.attempt}">'
                        f"{esc(lab)}#{c.attempt}</a>"
                    )
        review = (
            f' · <a class="review" href="{esc(review_url.rstrip("/"))}/#{esc(task)}">review</a>'
            if review_url
            else ""
        )
        items.append(
            f'<li><span class="task">{esc(task)}</span> ({int(tried)} agents tried){review}: '
            f"traces {' '.join(links) or '-'}</li>"
        )
    hint = (
        ""
        if review_url
        else " Pass <code>--review-url</code> (the review console's address) to link each "
        "task to its review."
    )
    return (
        f'<p class="muted">{len(unsolved)} scored task(s) no agent solved in any attempt: '
        f"possibly broken tasks worth a review.{hint}</p>"
        f'<ul id="unsolved">{"".join(items)}</ul>'
    )


def estimates_html(
    est: Any, basis: Sequence[str], table: Callable[[str, Any, Mapping[str, Any]], str]
) -> str:
    """The recorded estimate beside the actual figures."""
    if est is None or est.empty:
        return '<p class="muted">No run recorded an estimate (plan.json).</p>'
    disp = est.assign(
        range=[f"[{_num(lo)}, {_num(hi)}]" for lo, hi in zip(est["low"], est["high"], strict=True)],
        estimate=[_num(v) for v in est["estimate"]],
        actual=[_num(v) for v in est["actual"]],
        in_range=["-" if is_missing(v) else ("yes" if v else "NO") for v in est["in_range"]],
    )[["run_id", "agent", "measure", "estimate", "range", "actual", "in_range"]]
    lines = "".join(f"<li>{esc(b)}</li>" for b in basis)
    return table("estimates", disp, {}) + (f'<ul class="muted">{lines}</ul>' if lines else "")


def _num(v: Any) -> str:
    if is_missing(v):
        return "-"
    v = float(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}" if abs(v) < 1 else f"{v:.1f}"


def markdown_sections(
    tables: Mapping[str, Any], labels: Sequence[str], level: float, basis: Sequence[str]
) -> list[str]:
    """The uncertainty sections of the Markdown report."""
    out = [f"## Which differences are real ({level_text(level)})", ""]
    pairs = tables.get("pairwise")
    if pairs is None or pairs.empty:
        out += ["It takes two or more agents.", ""]
    else:
        out += [table_markdown(pairwise_display(pairs)), ""]
    hp = tables.get("harness_pairs")
    if hp is not None and not hp.empty:
        out += ["### Harnesses per backbone", "", table_markdown(pairwise_display(hp)), ""]
    un = tables.get("unsolved")
    out += ["## Tasks no agent solved", ""]
    if un is None or un.empty:
        out += ["Every scored task was solved by at least one agent.", ""]
    else:
        out += [", ".join(map(str, un["task_id"])), ""]
    ag = tables.get("attempt_agreement")
    if ag is not None and not ag.empty:
        out += ["## Agreement between attempts", "", table_markdown(ag), ""]
    est = tables.get("estimates")
    if est is not None and not est.empty:
        out += ["## Estimate and actual", "", table_markdown(est), ""]
        out += [f"- {b}" for b in basis] + [""]
    return out


__all__ = [
    "PAIRWISE_STYLE",
    "characteristics_display",
    "ci",
    "estimates_html",
    "level_text",
    "markdown_sections",
    "pairwise_display",
    "pairwise_matrix_html",
    "pass_at_k_display",
    "unsolved_html",
]
