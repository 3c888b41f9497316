"""One attempt's trace page: its conversation as a researcher reads it.

The page (:func:`render_trace`) is built on the server from the attempt's ``events.jsonl``
(read with :func:`dataspace.report.conversation.conversation`, the one reader of the trace
schema), its results row and ``run.json``. From the top:

- the outcome: verdict, end state, error code, the infrastructure faults retried before
  this try;
- the question, the system prompt and the first user message (folded);
- usage and timing per model turn, with totals beside the attempt's row (a difference is
  flagged);
- the conversation: each model turn with its message, reasoning, tool calls (arguments,
  output, exit code, truncation, images inline) and the model retries before it; actions
  no model asked for, reminders, errors and the submission in between;
- the submitted prediction beside the gold with the evaluator's explanation, when the
  attempt was scored (a release that hides its gold leaves no verdict, so nothing of the
  gold is shown).

Long outputs are folded (``<details>``), longer than :data:`MAX_OUTPUT` characters they are
cut in the middle with the count shown. The page needs no script. Traces are untrusted:
every text is escaped, and only base64 raster images (``data:image/png|jpeg|gif|webp``)
are embedded. Writing every page of a report is :mod:`dataspace.report.tracepages`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.report.page import esc, is_missing, page

logger = logging.getLogger(__name__)


MAX_IMAGE_CHARS = 30_000_000
MAX_OUTPUT = 60_000
FOLD_LINES = 25
FOLD_CHARS = 3_000
_DATA_URL_HEAD = re.compile(r"data:image/(png|jpeg|jpg|gif|webp);base64,")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_IMAGE_PATH = re.compile(rb'"(/output/[^"\\]{1,300}?\.(?:png|jpe?g|gif|webp))"', re.IGNORECASE)

TRACE_STYLE = """
.conv{max-width:1180px} .turn{border:1px solid var(--line);border-left:4px solid #4c78a8;
border-radius:6px;padding:6px 12px;margin:10px 0}
.turn>h3{margin:0 0 4px;font-size:.95em} .turn .use{color:var(--muted);font-weight:400}
.call{border-left:3px solid #59a14f;padding:2px 0 2px 10px;margin:6px 0}
.call .name{font-weight:600;font-size:.85em}
.say{white-space:pre-wrap;margin:4px 0}
.retry{color:var(--warn);font-size:.85em;margin:2px 0}
.fault{border-left:4px solid var(--bad);background:#fdf0ef;padding:5px 10px;margin:.5em 0}
.side{display:flex;gap:16px;flex-wrap:wrap} .side>div{flex:1 1 420px;min-width:0}
ul.why li{margin:2px 0}
"""

SUMMARY_KEYS = (
    "run_id",
    "agent",
    "harness",
    "model",
    "task_id",
    "attempt",
    "status",
    "passed",
    "error_code",
    "error",
    "infra_retries",
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
    "model_turns",
    "tool_actions",
    "model_calls",
    "model_seconds",
    "model_retries",
    "wall_seconds",
    "working_seconds",
    "sandbox_enforcement",
)
_RUN_KEYS = ("end_state", "submitted_path", "prediction_problem", "host", "try_index")


def safe_image_url(url: Any) -> str | None:
    """The URL when it is an inline base64 raster image, else None.

    >>> safe_image_url("data:image/png;base64,iVBO") is not None
    True
    >>> safe_image_url("javascript:alert(1)") is None
    True
    """
    if not isinstance(url, str) or len(url) > MAX_IMAGE_CHARS:
        return None
    m = _DATA_URL_HEAD.match(url)
    if m is None or not _BASE64.fullmatch(url, m.end()):
        return None
    return url


def image_paths(events: bytes) -> list[str]:
    """Image files under ``/output`` that a trace mentions (they may have been kept).

    >>> image_paths(b'{"type": "image", "path": "/output/p1.png"}')
    ['/output/p1.png']
    """
    found = dict.fromkeys(
        m.group(1).decode("utf-8", "replace") for m in _IMAGE_PATH.finditer(events)
    )
    return list(found)


def _missing(value: Any) -> bool:
    return value is None or value == "" or is_missing(value)


def _cell(key: str, value: Any) -> str:
    if key == "passed":
        return '<span class="ok">correct</span>' if value else '<span class="bad">incorrect</span>'
    if isinstance(value, float):
        return esc(f"{value:,.4f}".rstrip("0").rstrip("."))
    if isinstance(value, int) and not isinstance(value, bool):
        return esc(f"{value:,}")  # as an integral float shows: 1234 and 1234.0 alike
    if isinstance(value, dict | list):
        return f"<code>{esc(json.dumps(value, ensure_ascii=False, default=str))}</code>"
    return esc(value)


def summary_html(row: Mapping[str, Any] | None, run_meta: Mapping[str, Any] | None) -> str:
    """The attempt's facts as a two-column table (results row first, then ``run.json``)."""
    src: dict[str, Any] = {}
    for k in SUMMARY_KEYS:
        for doc in (row, run_meta):
            if doc and k in doc and not _missing(doc[k]):
                src[k] = doc[k]
                break
    for k in _RUN_KEYS:
        if run_meta and not _missing(run_meta.get(k)):
            src[k] = run_meta[k]
    rows = [f"<tr><th>{esc(k)}</th><td>{_cell(k, v)}</td></tr>" for k, v in src.items()]
    phases = [
        (k[len("phase_") : -len("_seconds")], v)
        for k, v in (row or {}).items()
        if k.startswith("phase_") and isinstance(v, int | float) and not _missing(v)
    ]
    if not phases and run_meta and isinstance(run_meta.get("phases"), Mapping):
        phases = [(k, v) for k, v in run_meta["phases"].items() if isinstance(v, int | float)]
    if phases:
        cell = " · ".join(f"{esc(k)} {v:.2f} s" for k, v in phases)
        rows.append(f"<tr><th>phases</th><td>{cell}</td></tr>")
    return f'<table id="summary">{"".join(rows)}</table>' if rows else ""


def _clip(text: str) -> str:
    if len(text) <= MAX_OUTPUT:
        return text
    head = MAX_OUTPUT * 2 // 3
    tail = MAX_OUTPUT - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut:,} characters not shown here ...]\n{text[-tail:]}"


def _pre(text: Any, *, cls: str = "", label: str = "output", fold: bool = True) -> str:
    """Text in a ``<pre>``; long text folded behind a summary with its size."""
    if text is None:
        return ""
    s = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, indent=1)
    body = f'<pre class="{cls}">{esc(_clip(s))}</pre>' if cls else f"<pre>{esc(_clip(s))}</pre>"
    lines = s.count("\n") + 1
    if fold and (lines > FOLD_LINES or len(s) > FOLD_CHARS):
        return (
            f'<details class="fold"><summary>{esc(label)}: {lines:,} lines, '
            f"{len(s):,} characters (click to unfold)</summary>{body}</details>"
        )
    return body


def _num(v: Any, spec: str = ",.0f") -> str:
    if v is None or is_missing(v):
        return "-"
    return format(v, spec)


def _usage_line(turn: Mapping[str, Any]) -> str:
    u = turn.get("usage")  # floats, as ``conversation`` makes them
    bits = []
    if u:
        cached = f" (cached {u['cached_input_tokens']:,.0f})" if u["cached_input_tokens"] else ""
        bits.append(f"in {u['input_tokens']:,.0f}{cached}")
        reasoning = f" (reasoning {u['reasoning_tokens']:,.0f})" if u["reasoning_tokens"] else ""
        bits.append(f"out {u['output_tokens']:,.0f}{reasoning}")
        bits.append(f"${u['cost_usd']:.5f}")
    if turn.get("latency_seconds") is not None:
        bits.append(f"latency {turn['latency_seconds']:.2f} s")
    return " · ".join(bits)


def _image(img: Mapping[str, Any], images: Mapping[str, str]) -> str:
    path = img.get("path")
    src = safe_image_url(img.get("data_url"))
    if src is None and isinstance(path, str):
        src = safe_image_url(images.get(path))
    label = path if isinstance(path, str) else "inline image"
    if src is None:
        return f'<p class="muted">{esc(label)} (image not embedded: not kept with the trace)</p>'
    return f'<img class="trace" alt="{esc(label)}" src="{src}">'


def _arguments(name: str, args: Any) -> str:
    # a shell command: ``command`` (bash, Claude Code's Bash) or ``cmd`` (Codex's exec_command)
    key = next((k for k in ("command", "cmd") if isinstance(args, Mapping) and k in args), None)
    if key is not None and isinstance(args[key], str):
        extra = {k: v for k, v in args.items() if k != key}
        more = " ".join(f'<span class="badge">{esc(k)} {esc(v)}</span>' for k, v in extra.items())
        return _pre(args[key], label="command") + more
    if isinstance(args, Mapping) and isinstance(args.get("code"), str):
        return _pre(args["code"], label="code")
    if args is None or args == {}:
        return ""
    return _pre(args, label="arguments")


def _call_html(call: Mapping[str, Any], images: Mapping[str, str]) -> str:
    badges = []
    code = call.get("exit_code")
    if code is not None:
        badges.append(f'<span class="badge {"ok" if code == 0 else "bad"}">exit {esc(code)}</span>')
    if call.get("ok") is False:
        badges.append('<span class="badge bad">failed</span>')
    if call.get("timed_out"):
        badges.append('<span class="badge bad">timed out</span>')
    if call.get("truncated"):
        badges.append(
            '<span class="badge warn trunc">output truncated by the harness '
            "(as the model saw it)</span>"
        )
    if call.get("duration_seconds") is not None:
        badges.append(f'<span class="badge">{call["duration_seconds"]:.2f} s</span>')
    out = call.get("output")
    if out:
        output = _pre(out, label="output")
    elif out is None:
        output = '<p class="muted">(no output recorded)</p>'
    else:
        output = '<p class="muted">(empty output)</p>'
    pics = "".join(_image(i, images) for i in call.get("images") or [])
    return (
        f'<div class="call tool-call" data-tool="{esc(call.get("name"))}">'
        f'<div class="name">tool call → {esc(call.get("name"))} {"".join(badges)}</div>'
        f"{_arguments(str(call.get('name')), call.get('arguments'))}{output}{pics}</div>"
    )


def _when(t: Any) -> str:
    return f"t={t:.2f} s" if isinstance(t, int | float) else ""


def _turn_html(turn: Mapping[str, Any], images: Mapping[str, str]) -> str:
    retries = "".join(
        f'<div class="retry infra-retry">model request retried ({esc(r.get("retry"))}): '
        f"{esc(r.get('error'))}"
        + (f" · waited {r['delay_seconds']:.2f} s" if r.get("delay_seconds") is not None else "")
        + "</div>"
        for r in turn.get("retries") or []
    )
    usage = _usage_line(turn)  # numbers only: no escaping needed
    head = (
        f'<h3>Turn {turn["n"]} <span class="use">· {_when(turn.get("t"))}'
        f"{' · ' + usage if usage else ''}</span></h3>"
    )
    parts = [retries, head]
    if turn.get("reasoning"):
        parts.append(
            f"<details><summary>reasoning</summary>{_pre(turn['reasoning'], fold=False)}</details>"
        )
    if turn.get("content"):
        parts.append(f'<div class="say model-message">{esc(_clip(turn["content"]))}</div>')
    elif not turn.get("tool_calls"):
        parts.append('<p class="muted">(no message recorded for this turn)</p>')
    for note in turn.get("notes") or []:
        parts.append(f'<p class="bad">{esc(note)}</p>')
    parts.extend(_call_html(c, images) for c in turn.get("tool_calls") or [])
    return f'<section class="turn" id="turn-{turn["n"]}">{"".join(parts)}</section>'


def _item_html(item: Mapping[str, Any], conv: Mapping[str, Any], images: Mapping[str, str]) -> str:
    kind = item["kind"]
    if kind == "turn":
        return _turn_html(conv["turns"][item["turn"]], images)
    when = esc(_when(item.get("t")))
    if kind == "tool":
        return (
            f'<section class="ev tool"><h3>Action (no model turn) · {when}</h3>'
            f"{_call_html(item, images)}</section>"
        )
    if kind == "submit":
        return (
            f'<section class="ev submit" id="submitted"><h3>Submitted · {when}</h3>'
            f"<code>{esc(item.get('path'))}</code></section>"
        )
    if kind == "error":
        return (
            f'<section class="ev error"><h3><span class="bad">Error</span> · {when}</h3>'
            f"{_pre(item.get('text'), label='error')}</section>"
        )
    if kind == "warning":
        return (
            f'<section class="ev other warning"><h3><span class="warn">Harness warning</span>'
            f" · {when}</h3>{_pre(item.get('text'), label='warning')}</section>"
        )
    if kind == "reminder":
        return (
            f'<section class="ev other"><h3>Harness reminder · {when}</h3>'
            f"<p>{esc(item.get('text'))}</p></section>"
        )
    if kind == "retry":
        return (
            f'<section class="ev error"><h3>Model request failed · {when}</h3>'
            f'<div class="retry infra-retry">{esc(item.get("error"))}</div></section>'
        )
    if kind == "stream":
        code = item.get("exit_code")
        badge = (
            ""
            if code is None
            else f'<span class="badge {"ok" if code == 0 else "bad"}">exit {esc(code)}</span>'
        )
        if item.get("timed_out"):
            sig = esc(item.get("signal"))
            badge += f'<span class="badge bad">stopped at the deadline ({sig})</span>'
        # the raw stream repeats the conversation above: always folded
        stdout = item.get("stdout") or ""
        out = (
            f'<details class="fold"><summary>its own event stream (stdout): '
            f"{stdout.count(chr(10)):,} lines, {len(stdout):,} characters</summary>"
            f"{_pre(stdout, fold=False)}</details>"
        )
        err = (
            '<div class="muted">stderr (the end)</div>' + _pre(item.get("stderr"), label="stderr")
            if item.get("stderr")
            else ""
        )
        return (
            f'<section class="ev other" id="harness-output"><h3>{esc(item.get("harness"))} '
            f"ended · {when} {badge}</h3>{out}{err}</section>"
        )
    if kind == "image":
        return f'<section class="ev image"><h3>Image · {when}</h3>{_image(item, images)}</section>'
    fields = item.get("fields") or {}
    return (
        f'<section class="ev other"><h3>{esc(item.get("type"))} · {when}</h3>'
        f"{_pre(fields, label='fields')}</section>"
    )


_USAGE_COLS = (
    ("input_tokens", "input"),
    ("cached_input_tokens", "cached"),
    ("output_tokens", "output"),
    ("reasoning_tokens", "reasoning"),
    ("cost_usd", "cost (USD)"),
)


def _turns_table(conv: Mapping[str, Any], row: Mapping[str, Any] | None) -> str:
    from dataspace.traces import usage_matches

    turns = conv["turns"]
    if not turns:
        return ""
    head = "".join(
        f'<th class="n">{h}</th>'
        for h in ("t (s)", "latency (s)", *(c[1] for c in _USAGE_COLS), "tool calls", "retries")
    )
    body = []
    keys = [k for k, _ in _USAGE_COLS]
    for t in turns:
        # numbers only: formatted, they need no escaping
        u = t["usage"]
        when, lat = t["t"], t["latency_seconds"]
        if u:
            use = (
                "".join(f'<td class="n">{u[k]:,.0f}</td>' for k in keys[:-1])
                + f'<td class="n">{u["cost_usd"]:.5f}</td>'
            )
        else:
            use = '<td class="n">-</td>' * len(keys)
        body.append(
            f'<tr><td><a href="#turn-{t["n"]}">{t["n"]}</a></td>'
            f'<td class="n">{"-" if when is None else format(when, ".2f")}</td>'
            f'<td class="n">{"-" if lat is None else format(lat, ".2f")}</td>{use}'
            f'<td class="n">{len(t["tool_calls"])}</td><td class="n">{len(t["retries"])}</td>'
            "</tr>"
        )
    tot = conv["totals"]
    total_cells = ["", _num(tot["latency_seconds"], ".2f")] + [
        _num(tot[k], ".5f" if k == "cost_usd" else ",.0f") for k, _ in _USAGE_COLS
    ]
    total_cells += [str(sum(len(t.get("tool_calls") or []) for t in turns)), ""]
    body.append(
        '<tr class="total" id="turns-total"><th>total</th>'
        + "".join(f'<td class="n">{esc(c)}</td>' for c in total_cells)
        + "</tr>"
    )
    if row:
        row_cells = ["", _num(row.get("model_seconds"), ".2f")] + [
            _num(row.get(k), ".5f" if k == "cost_usd" else ",.0f") for k, _ in _USAGE_COLS
        ]
        row_cells += [_num(row.get("tool_actions"), ".0f"), _num(row.get("model_retries"), ".0f")]
        body.append(
            '<tr class="muted" id="turns-row"><th>attempt row</th>'
            + "".join(f'<td class="n">{esc(c)}</td>' for c in row_cells)
            + "</tr>"
        )
    note = ""
    differ = usage_matches(tot, row or {})
    if differ:
        note = (
            f'<p class="note" id="usage-mismatch">The turns add up to other totals than the '
            f"attempt's row for {', '.join(differ)} (a model call the trace did not "
            "record).</p>"
        )
    return (
        '<h2 id="usage">Usage and timing per turn</h2><div class="wrap"><table id="turns">'
        f"<thead><tr><th>turn</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"</div>{note}"
    )


def _grid(preview: Mapping[str, Any] | None, table_id: str) -> str:
    if not preview:
        return '<p class="muted">(none)</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in preview.get("header") or [])
    rows = "".join(
        "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>"
        for r in preview.get("rows") or []
    )
    more = int(preview.get("row_count") or 0) - len(preview.get("rows") or [])
    tail = f'<p class="muted">… and {more:,} more row(s)</p>' if more > 0 else ""
    return (
        f'<div class="wrap"><table id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>{tail}"
    )


def _verdict(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    v = (row or {}).get("verdict")
    if isinstance(v, str):
        with contextlib.suppress(ValueError):
            v = json.loads(v)
    return v if isinstance(v, dict) else None


def _answer_html(row: Mapping[str, Any] | None, conv: Mapping[str, Any]) -> str:
    v = _verdict(row)
    submitted = conv.get("submitted") or (row or {}).get("submitted_path")
    if v is None:
        sub = f"<code>{esc(submitted)}</code>" if submitted else "nothing"
        return (
            '<h2 id="answer">Answer</h2>'
            f'<p id="prediction" class="muted">Submitted: {sub}. Not scored here (no '
            "verdict: the release does not show its gold answers, or the attempt was "
            "not scored), so the gold is not shown.</p>"
        )
    e = v.get("explanation") if isinstance(v.get("explanation"), dict) else None
    outcome = (
        '<span class="ok">correct</span>'
        if v.get("passed")
        else f'<span class="bad">incorrect</span> · <code>{esc(v.get("error_code"))}</code>'
    )
    why = ""
    if e and e.get("summary"):
        why = (
            '<h3>Why (the evaluator\'s explanation)</h3><ul class="why" id="diagnosis">'
            + "".join(f"<li>{esc(s)}</li>" for s in e["summary"])
            + "</ul>"
        )
    elif v.get("error"):
        why = f'<p id="diagnosis">{esc(v.get("error"))}</p>'
    if e is None:
        return f'<h2 id="answer">Answer</h2><p>{outcome}</p>{why}'
    return (
        f'<h2 id="answer">Answer: {outcome}</h2>{why}<div class="side">'
        "<div><h3>Submitted prediction</h3>"
        f"{_grid(e.get('prediction_preview'), 'prediction')}</div>"
        f"<div><h3>Gold</h3>{_grid(e.get('gold_preview'), 'gold')}</div></div>"
    )


def render_trace(
    *,
    title: str,
    events: bytes | None,
    row: Mapping[str, Any] | None = None,
    run_meta: Mapping[str, Any] | None = None,
    back_href: str | None = None,
    images: Mapping[str, str] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """One attempt's trace page.

    Args:
        title: the page title (agent · task · attempt).
        events: the raw ``events.jsonl`` (None when the attempt has none).
        row: the attempt's results row.
        run_meta: ``run.json`` when present.
        back_href: link back to the report.
        images: image path (as the trace names it) -> data URL, for images kept with the
            attempt; only safe data URLs are used.
        notes: lines shown at the top (files that could not be read).
    """
    from dataspace.report.conversation import conversation
    from dataspace.traces import read_events

    conv = conversation(read_events(events))
    counts = conv["counts"]
    status = (row or {}).get("status") or (run_meta or {}).get("end_state") or ""
    passed = (row or {}).get("passed")
    verdict = ""
    if passed is True:
        verdict = '<span class="badge ok">correct</span>'
    elif passed is False:
        code = (row or {}).get("error_code")
        verdict = '<span class="badge bad">incorrect</span>' + (
            f'<span class="badge">{esc(code)}</span>' if code else ""
        )
    back = f'<a id="back" href="{esc(back_href)}">← report</a> ' if back_href else ""
    count_text = (
        f"{counts['turns']} model turns · {counts['tool_calls']} tool calls · "
        f"{counts['retries']} retries · {counts['events']} events"
    )
    header = (
        f'<header class="top"><h1>{esc(title)}</h1><div class="sub">{back}{verdict}'
        f'<span class="badge">{esc(status)}</span> <span id="counts">{esc(count_text)}</span>'
        "</div></header>"
    )
    safe_images = {p: u for p, u in (images or {}).items() if safe_image_url(u)}
    body = [f'<p class="note">{esc(n)}</p>' for n in notes]
    failures = (run_meta or {}).get("infra_failures")
    if isinstance(failures, list) and failures:
        items = "".join(
            f"<li><code>{esc(f.get('code') if isinstance(f, Mapping) else '')}</code> "
            f"{esc(f.get('error') if isinstance(f, Mapping) else f)}</li>"
            for f in failures
        )
        body.append(
            f'<div class="fault" id="infra-faults"><b>Infrastructure faults before this try '
            f"(each try was discarded and the attempt run again):</b><ol>{items}</ol></div>"
        )
    if status == "infra_failed" or (row or {}).get("error_code") == "infra_failed":
        body.append(
            '<div class="fault">This attempt ended in an infrastructure failure after its '
            f"retries: {esc((row or {}).get('error'))}</div>"
        )
    body.append('<section id="question"><h2>Question</h2>')
    q = conv.get("question")
    body.append(
        f'<div class="say">{esc(q)}</div>'
        if q
        else '<p class="muted">(the trace does not record the question)</p>'
    )
    body.append("</section>")
    if conv.get("system_prompt"):
        body.append(
            '<details id="system-prompt"><summary>system prompt '
            f"({len(conv['system_prompt']):,} characters)</summary>"
            f"{_pre(conv['system_prompt'], fold=False)}</details>"
        )
    elif conv.get("system_prompt_sha256"):
        body.append(
            f'<p class="muted">system prompt sha256 {esc(conv["system_prompt_sha256"])}</p>'
        )
    if conv.get("user_prompt"):
        body.append(
            '<details id="user-prompt"><summary>first user message</summary>'
            f"{_pre(conv['user_prompt'], fold=False)}</details>"
        )
    body.append(_answer_html(row, conv))
    body.append(_turns_table(conv, row))
    body.append('<h2 id="conversation-head">Conversation</h2><div class="conv" id="conversation">')
    if not conv["items"]:
        body.append('<p class="muted">No events were recorded for this attempt.</p>')
    body.extend(_item_html(item, conv, safe_images) for item in conv["items"])
    body.append("</div>")
    body.append(f"<h2>Attempt</h2>{summary_html(row, run_meta)}")
    v = _verdict(row)
    if v:
        shown = {k: x for k, x in v.items() if k != "explanation"}
        body.append(
            "<details><summary>evaluator verdict (official fields)</summary><pre>"
            f"{esc(json.dumps(shown, ensure_ascii=False, indent=1, default=str))}</pre></details>"
        )
    html = page(title, "".join(body), header=header)
    return html.replace("</style>", TRACE_STYLE + "</style>", 1)


__all__ = [
    "MAX_OUTPUT",
    "SUMMARY_KEYS",
    "TRACE_STYLE",
    "image_paths",
    "render_trace",
    "safe_image_url",
    "summary_html",
]
