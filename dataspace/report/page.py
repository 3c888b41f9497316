"""HTML and Markdown building blocks shared by the report and the trace pages.

Pages are self-contained: styles and the small table-sorting script are inline, figures
are inline SVG, nothing is fetched, so a page works offline and from ``file://``.
Everything that comes from a run (agent names, task ids, traces) is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Formatter = str | Callable[[Any], str]

STYLE = """
:root{--fg:#1d2125;--muted:#5f6b76;--line:#d8dde3;--head:#f2f4f7;--ok:#137333;
--bad:#b3261e;--warn:#8a5a00;--code:#f6f8fa}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans","Noto Sans CJK SC",
"Noto Sans CJK",sans-serif;
color:var(--fg);margin:0;line-height:1.45}
header.top{background:#20303f;color:#fff;padding:14px 28px}
header.top h1{margin:0;font-size:1.35em} header.top a{color:#cfe3ff}
header.top .sub{color:#c3ccd5;font-size:.9em;margin-top:2px}
main{padding:8px 28px 40px;max-width:1500px}
nav.toc{font-size:.9em;margin:10px 0 4px} nav.toc a{margin-right:12px}
h2{margin-top:1.8em;border-bottom:1px solid var(--line);padding-bottom:3px;font-size:1.2em}
h3{font-size:1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.86em}
td,th{border:1px solid var(--line);padding:3px 7px;vertical-align:top}
th{background:var(--head);text-align:left;position:sticky;top:0}
th.sortable{cursor:pointer} th.sortable:hover{background:#e4e8ee}
th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.wrap{overflow-x:auto;max-width:100%}
.note{color:var(--warn);background:#fff8e6;border-left:3px solid #e0a800;
padding:5px 10px;margin:.5em 0;font-size:.9em}
.muted{color:var(--muted)} .ok{color:var(--ok);font-weight:600}
.bad{color:var(--bad);font-weight:600} .warn{color:var(--warn);font-weight:600}
figure{margin:1em 0} figure svg{max-width:100%;height:auto}
figcaption{color:var(--muted);font-size:.85em}
pre{background:var(--code);border:1px solid var(--line);padding:6px 9px;overflow-x:auto;
white-space:pre-wrap;word-break:break-word;font-size:.82em;max-height:36em;overflow-y:auto;
margin:.3em 0}
code{font-size:.9em}
details>summary{cursor:pointer;color:var(--muted)}
a.att{text-decoration:none;font-family:ui-monospace,monospace;padding:0 2px;border-radius:3px}
a.att.ok{background:#e6f4ea} a.att.bad{background:#fce8e6} a.att.na{background:#eee;color:#555}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:.8em;color:#1d2125;
background:#eef1f5;margin-right:4px}
.ev{border:1px solid var(--line);border-radius:6px;padding:6px 10px;margin:8px 0}
.ev>h3{margin:0 0 4px;font-size:.92em} .ev.model{border-left:4px solid #4c78a8}
.ev.tool{border-left:4px solid #59a14f} .ev.error{border-left:4px solid var(--bad)}
.ev.submit{border-left:4px solid #b07aa1} .ev.image{border-left:4px solid #edc948}
.ev.other{border-left:4px solid #bab0ac}
.msg{margin:4px 0} .msg .role{font-weight:600;font-size:.8em;color:var(--muted)}
img.trace{max-width:100%;max-height:640px;border:1px solid var(--line)}
th,th.n{white-space:normal;overflow-wrap:break-word;font-weight:600}
td{overflow-wrap:break-word} main table{font-size:.8em} td,th{padding:2px 5px}
table.compact{font-size:.8em} table.compact td.q{min-width:16em;max-width:26em}
table.compact td.traits{max-width:11em;color:var(--muted)} table.compact td.task{white-space:nowrap}
table.compact th.agent{writing-mode:vertical-rl;transform:rotate(180deg);max-height:11em;
white-space:nowrap;min-width:0;text-align:left}
"""

SORT_SCRIPT = """
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, col) {
    th.classList.add('sortable');
    th.setAttribute('aria-sort', 'none');
    th.title = 'click to sort';
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      if (!body) { return; }
      var rows = Array.prototype.slice.call(body.rows);
      var asc = th.getAttribute('data-dir') !== 'asc';
      table.querySelectorAll('th').forEach(function (h) {
        h.removeAttribute('data-dir'); h.setAttribute('aria-sort', 'none');
      });
      th.setAttribute('data-dir', asc ? 'asc' : 'desc');
      th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
      function key(row) {
        var cell = row.cells[col];
        var text = cell ? (cell.getAttribute('data-v') || cell.textContent) : '';
        var num = parseFloat(text.replace(/[,%$]/g, ''));
        return isNaN(num) ? text.toLowerCase() : num;
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x !== typeof y) { x = String(x); y = String(y); }
        return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"""


def esc(value: Any) -> str:
    """HTML-escape anything (``None`` becomes an empty string).

    >>> esc('<b a="1">')
    '&lt;b a=&quot;1&quot;&gt;'
    """
    if value is None:
        return ""
    s = value if type(value) is str else str(value)
    # html.escape(s, quote=True), inlined: pages call this thousands of times
    return (
        s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )


def is_missing(value: Any) -> bool:
    """None, NaN or pandas NA.

    >>> import pandas as pd
    >>> is_missing(float("nan")), is_missing(0), is_missing(pd.NA)
    (True, False, True)
    """
    if value is None or type(value).__name__ == "NAType":  # pd.NA: bool(pd.NA) raises
        return True
    try:
        return bool(value != value)  # NaN compares unequal to itself
    except (TypeError, ValueError):
        return type(value).__name__ == "NAType"  # pd.NA: its comparisons are NA too


def fmt(value: Any, spec: Formatter | None = None) -> str:
    """Format a cell: ``-`` when missing, else by format spec or callable.

    >>> fmt(0.16901, ".3f"), fmt(None, ".1f"), fmt(3)
    ('0.169', '-', '3')
    """
    if is_missing(value):
        return "-"
    if spec is None:
        if isinstance(value, float):
            return f"{value:.2f}" if math.isfinite(value) else "-"
        return str(value)
    if callable(spec):
        return spec(value)
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


def _is_numeric(series: Any) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(series)) and not pd.api.types.is_bool_dtype(series)


def table_html(
    df: Any,
    *,
    table_id: str,
    formats: Mapping[str, Formatter] | None = None,
    headers: Mapping[str, str] | None = None,
    raw: frozenset[str] = frozenset(),
    sortable: bool = True,
) -> str:
    """A DataFrame as an HTML table.

    Args:
        df: the table.
        table_id: the element id.
        formats: column -> format spec or callable.
        headers: column -> display name.
        raw: columns whose cells are already HTML (built by us, escaped inside).
        sortable: let a click on a header sort the rows.
    """
    formats = formats or {}
    headers = headers or {}
    cols = list(df.columns)
    numeric = {c for c in cols if _is_numeric(df[c])}
    head = "".join(
        f'<th class="{"n" if c in numeric else ""}">{esc(headers.get(c, c))}</th>' for c in cols
    )
    body = []
    for row in df.itertuples(index=False, name=None):
        cells = []
        for c, v in zip(cols, row, strict=True):
            text = str(v) if c in raw else esc(fmt(v, formats.get(c)))
            if c in numeric:
                data = "" if is_missing(v) else f' data-v="{esc(v)}"'
                cells.append(f'<td class="n"{data}>{text}</td>')
            else:
                cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cls = ' class="sortable"' if sortable else ""
    return (
        f'<div class="wrap"><table id="{esc(table_id)}"{cls}><thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def table_markdown(
    df: Any,
    *,
    formats: Mapping[str, Formatter] | None = None,
    headers: Mapping[str, str] | None = None,
) -> str:
    """A DataFrame as a GitHub-flavoured Markdown table."""
    formats = formats or {}
    headers = headers or {}
    cols = list(df.columns)
    numeric = {c for c in cols if _is_numeric(df[c])}

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(str(headers.get(c, c))) for c in cols) + " |",
        "|" + "|".join("---:" if c in numeric else "---" for c in cols) + "|",
    ]
    for row in df.itertuples(index=False, name=None):
        lines.append(
            "| "
            + " | ".join(cell(fmt(v, formats.get(c))) for c, v in zip(cols, row, strict=True))
            + " |"
        )
    return "\n".join(lines)


def page(title: str, body: str, *, header: str = "", script: bool = False) -> str:
    """A complete HTML document with the shared style."""
    js = f"<script>{SORT_SCRIPT}</script>" if script else ""
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
        f"{header}<main>{body}</main>{js}</body></html>\n"
    )


__all__ = ["esc", "fmt", "is_missing", "page", "table_html", "table_markdown"]
