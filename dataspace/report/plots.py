"""The report's figures, drawn with matplotlib and returned as inline SVG text.

Figures are built with ``matplotlib.figure.Figure`` directly (no pyplot, no global
backend), so drawing is thread-safe and needs no display. Text stays text in the SVG
(``svg.fonttype = none``): the page stays small and searchable, and the browser's own
fonts render it. Each function returns None when there is nothing to draw.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Sequence
from typing import Any

from dataspace.report.tables import PARETO_METRICS

logger = logging.getLogger(__name__)

_RC: Any = {
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": None,
}
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#3182bd",
    "#e6550d",
    "#31a354",
    "#756bb1",
    "#636363",
)


def colors(labels: Sequence[str]) -> dict[str, str]:
    """A stable colour per agent label (in the order given).

    >>> colors(["a", "b"])["b"]
    '#ff7f0e'
    """
    return {lab: _PALETTE[i % len(_PALETTE)] for i, lab in enumerate(labels)}


def import_drawing() -> None:
    """Import the matplotlib modules drawing a figure takes.

    The report calls it before it forks the process that draws its heaviest figures, so the
    child inherits these modules instead of importing them a second time (about 0.2 CPU s
    of every report; the figures are the same).
    """
    import matplotlib.backends.backend_agg  # text extents (spread_labels)
    import matplotlib.backends.backend_svg  # savefig(format="svg")
    import matplotlib.figure  # noqa: F401


def _svg(fig: Any, salt: str) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({**_RC, "svg.hashsalt": salt}):
        fig.savefig(
            buf,
            format="svg",
            bbox_inches="tight",
            metadata={"Creator": None, "Date": None, "Format": None, "Type": None},
        )
    text = buf.getvalue()
    start = text.find("<svg")
    # ids inside each SVG are salted per figure, so several inline SVGs never collide
    return text[start:] if start >= 0 else text


def _figure(width: float, height: float) -> Any:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        return Figure(figsize=(width, height), layout="constrained")


def _finite(v: Any) -> bool:
    try:
        return v is not None and not math.isnan(float(v))
    except (TypeError, ValueError):
        return False


def pareto_figure(pareto: Any, labels: Sequence[str]) -> str | None:
    """Accuracy against tokens, cost, actions and latency; dashed lines join each front."""
    fig = pareto_plot(pareto, labels)
    return None if fig is None else _svg(fig, "pareto")


def pareto_plot(pareto: Any, labels: Sequence[str]) -> Any:
    """The figure of :func:`pareto_figure` (None when there is nothing to plot)."""
    import matplotlib

    metrics = [
        (col, axis)
        for col, axis, _ in PARETO_METRICS
        if any(_finite(v) for v in pareto.loc[pareto["metric"] == col, "value"])
    ]
    if not metrics or pareto["accuracy_pct"].map(_finite).sum() == 0:
        return None
    col_of = colors(labels)
    with matplotlib.rc_context(_RC):
        fig = _figure(10.0, 3.6 * math.ceil(len(metrics) / 2))
        axes = fig.subplots(math.ceil(len(metrics) / 2), 2, squeeze=False).ravel()
        for ax, (col, axis) in zip(axes, metrics, strict=False):
            sub = pareto[
                (pareto["metric"] == col)
                & pareto["value"].map(_finite)
                & pareto["accuracy_pct"].map(_finite)
            ]
            notes = []
            for r in sub.itertuples(index=False):
                ax.scatter(
                    [r.value],
                    [r.accuracy_pct],
                    color=col_of.get(r.label, "#333"),
                    s=36,
                    zorder=3,
                    edgecolors="white",
                    linewidths=0.6,
                )
                notes.append(
                    ax.annotate(
                        str(r.label),
                        (r.value, r.accuracy_pct),
                        fontsize=7,
                        xytext=(4, 3),
                        textcoords="offset points",
                    )
                )
            spread_labels(fig, notes)
            front = sub[sub["on_front"]].sort_values("value")
            if len(front) > 1:
                ax.plot(
                    front["value"], front["accuracy_pct"], "--", color="#555", linewidth=1, zorder=2
                )
            ax.set_xlabel(axis)
            ax.set_ylabel("accuracy (%)")
            ax.grid(True, alpha=0.3)
        for ax in axes[len(metrics) :]:
            ax.set_visible(False)
        fig.suptitle("Accuracy–efficiency trade-offs (dashed: Pareto front)")
    return fig


def spread_labels(fig: Any, notes: list[Any], gap_points: float = 1.0) -> None:
    """Move point labels up until no two overlap (agents with similar figures).

    Labels are placed from the lowest up; one that overlaps a placed label moves above it.
    Offsets are in points, so they hold when the figure is laid out again on saving.
    """
    if len(notes) < 2:
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    # the layout, so label extents are final: what drawing the figure would do first (the
    # artists' own drawing adds nothing to the extents)
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
    else:
        fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    points_per_pixel = 72.0 / fig.dpi
    placed: list[Any] = []
    for note in sorted(notes, key=lambda n: n.get_window_extent(renderer).y0):
        box = note.get_window_extent(renderer)
        for _ in range(len(placed) + 1):
            above = [p for p in placed if box.overlaps(p)]
            if not above:
                break
            shift = max(p.y1 for p in above) - box.y0 + gap_points / points_per_pixel
            x, y = note.xyann
            note.xyann = (x, y + shift * points_per_pixel)
            box = note.get_window_extent(renderer)
        placed.append(box)


def accuracy_figure(accuracy: Any) -> str | None:
    """Horizontal bars: accuracy per agent with correct/scored counts."""
    import matplotlib

    acc = accuracy[accuracy["accuracy_pct"].map(_finite)]
    if acc.empty:
        return None
    labels = [str(x) for x in acc["label"]][::-1]
    values = [float(x) for x in acc["accuracy_pct"]][::-1]
    notes = [f"{int(c)}/{int(s)}" for c, s in zip(acc["correct"], acc["scored"], strict=True)][::-1]
    col_of = colors([str(x) for x in accuracy["label"]])
    with matplotlib.rc_context(_RC):
        fig = _figure(8.0, 0.9 + 0.32 * len(labels))
        ax = fig.subplots()
        ax.barh(labels, values, color=[col_of[lab] for lab in labels])
        for y, (v, note) in enumerate(zip(values, notes, strict=True)):
            ax.text(v + 0.8, y, f"{v:.2f}%  ({note})", va="center", fontsize=7)
        ax.set_xlim(0, 112)
        ax.set_xlabel("task accuracy (%)")
        ax.set_title("Accuracy per agent")
    return _svg(fig, "accuracy")


def spread_figure(accuracy: Any) -> str | None:
    """Accuracy by harness for every model run under two or more harnesses."""
    import matplotlib

    acc = accuracy[accuracy["accuracy_pct"].map(_finite)].dropna(subset=["model"])
    groups = [
        (m, g.sort_values("accuracy_pct", ascending=False))
        for m, g in acc.groupby("model", sort=False)
        if g["harness"].nunique() > 1
    ]
    if not groups:
        return None
    with matplotlib.rc_context(_RC):
        fig = _figure(8.0, 1.0 + sum(0.32 * len(g) + 0.6 for _, g in groups))
        axes = fig.subplots(len(groups), 1, squeeze=False).ravel()
        for ax, (model, g) in zip(axes, groups, strict=True):
            names = [
                f"{h} ({lab})" if h != lab else str(h)
                for h, lab in zip(g["harness"], g["label"], strict=True)
            ][::-1]
            vals = [float(v) for v in g["accuracy_pct"]][::-1]
            ax.barh(names, vals, color="#4c78a8")
            for y, v in enumerate(vals):
                ax.text(v + 0.8, y, f"{v:.2f}%", va="center", fontsize=7)
            ax.set_xlim(0, 110)
            spread = max(vals) - min(vals)
            ax.set_title(f"model {model}: harness spread {spread:.2f} points")
            ax.set_xlabel("task accuracy (%)")
    return _svg(fig, "spread")


def gap_figure(long: Any, labels: Sequence[str]) -> str | None:
    """Heatmap of each group's accuracy gap (points) to its reference group (Figure 6)."""
    import matplotlib
    import numpy as np

    sub = long[~long["is_reference"]] if not long.empty else long
    if sub.empty:
        return None
    rows = list(dict.fromkeys(zip(sub["characteristic"], sub["group"], strict=True)))
    mat = np.full((len(rows), len(labels)), np.nan)
    index = {r: i for i, r in enumerate(rows)}
    lab_index = {lab: j for j, lab in enumerate(labels)}
    for r in sub.itertuples(index=False):
        if r.label in lab_index and _finite(r.gap_pp):
            mat[index[(r.characteristic, r.group)], lab_index[r.label]] = float(r.gap_pp)
    if np.isnan(mat).all():
        return None
    lim = max(5.0, float(np.nanmax(np.abs(mat))))
    with matplotlib.rc_context(_RC):
        fig = _figure(max(5.0, 1.6 + 0.75 * len(labels)), 1.0 + 0.32 * len(rows))
        ax = fig.subplots()
        im = ax.imshow(np.ma.masked_invalid(mat), cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_xticks(range(len(labels)), [str(x) for x in labels], rotation=35, ha="right")
        ax.set_yticks(range(len(rows)), [f"{c}: {g}" for c, g in rows])
        for i in range(len(rows)):
            for j in range(len(labels)):
                if not np.isnan(mat[i, j]):
                    dark = abs(mat[i, j]) > 0.6 * lim
                    ax.text(
                        j,
                        i,
                        f"{mat[i, j]:+.1f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if dark else "black",
                    )
        fig.colorbar(im, ax=ax, label="points vs. reference group")
        ax.set_title("Accuracy gap by task characteristic")
    return _svg(fig, "gaps")


def pass_at_k_figure(pk: Any, labels: Sequence[str]) -> str | None:
    """pass@k curves per agent."""
    import matplotlib

    if pk is None or pk.empty:
        return None
    ks = sorted(
        int(c[len("pass@") : -len("_pct")])
        for c in pk.columns
        if c.startswith("pass@") and c.endswith("_pct")
    )
    col_of = colors(labels)
    with matplotlib.rc_context(_RC):
        fig = _figure(6.0, 3.6)
        ax = fig.subplots()
        for r in pk.to_dict("records"):
            ys = [r.get(f"pass@{k}_pct") for k in ks]
            ax.plot(
                ks,
                [y if _finite(y) else float("nan") for y in ys],
                marker="o",
                label=str(r["label"]),
                color=col_of.get(r["label"], "#333"),
            )
        ax.set_xticks(ks)
        ax.set_xlabel("k")
        ax.set_ylabel("pass@k (%)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        ax.set_title("pass@k")
    return _svg(fig, "passk")


__all__ = [
    "accuracy_figure",
    "colors",
    "gap_figure",
    "import_drawing",
    "pareto_figure",
    "pass_at_k_figure",
    "spread_figure",
]
