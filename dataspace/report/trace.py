r"""The trace viewer: one self-contained HTML page per attempt.

A page embeds the attempt's ``events.jsonl`` as it is (JSON lines with ``t`` and ``type``)
and an inline viewer script that draws it when the page opens: model calls (the new input
messages, the reply, its tool calls, usage and latency per turn), tool executions and their
output, images, the submission and errors. Unknown event types are drawn generically as
key/value JSON and a line that is not JSON is shown as text, so a new harness's trace never
breaks the viewer. The attempt's summary (status, verdict, tokens, cost, timings) is
rendered on the server from the results row and ``run.json``.

Embedding the log unparsed keeps building thousands of pages cheap (parsing traces whose
every model call repeats the conversation costs more than everything else in a report),
and the page stays a single file that works offline. The log is embedded compressed
(zlib, then base64), which shrinks such logs several times over; the browser inflates it
with ``DecompressionStream``.

Traces are untrusted. Base64 text cannot close the block that holds the log, the image map
is JSON with every ``<`` written as ``\u003c``, the viewer builds the page with DOM text
nodes only (never ``innerHTML``), and embeds only base64 raster images
(``data:image/png|jpeg|gif|webp``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.report.page import esc, page

logger = logging.getLogger(__name__)

MAX_IMAGE_CHARS = 30_000_000
_DATA_URL_HEAD = re.compile(r"data:image/(png|jpeg|jpg|gif|webp);base64,")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_IMAGE_PATH = re.compile(rb'"(/output/[^"\\]{1,300}?\.(?:png|jpe?g|gif|webp))"', re.IGNORECASE)


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


def script_json(data: bytes | str) -> str:
    r"""Text safe inside ``<script type="application/json">``.

    Every ``<`` becomes the JSON escape ``\u003c`` (valid within JSON strings, and ``<``
    occurs nowhere else in JSON), so the block can be neither closed nor commented out by
    its content.

    >>> script_json('{"a": "</script>"}')
    '{"a": "\\u003c/script>"}'
    """
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text.replace("<", "\\u003c")


def pack_events(events: bytes | None) -> str:
    r"""The event log as the page embeds it: zlib-compressed, then base64.

    Compression keeps pages small (every model call in a log may repeat the conversation so
    far), and base64 text can never close the ``<script>`` block that holds it. The page
    inflates it with the browser's ``DecompressionStream``.

    >>> import base64, zlib
    >>> zlib.decompress(base64.b64decode(pack_events(b'{"type": "submit"}\n')))
    b'{"type": "submit"}\n'
    """
    return base64.b64encode(zlib.compress(events or b"", 1)).decode("ascii")


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
    "wall_seconds",
    "working_seconds",
    "sandbox_enforcement",
)
_RUN_KEYS = ("end_state", "submitted_path", "prediction_problem", "host", "try_index")


def _cell(key: str, value: Any) -> str:
    if key == "passed":
        return '<span class="ok">correct</span>' if value else '<span class="bad">incorrect</span>'
    if isinstance(value, float):
        return esc(f"{value:,.4f}".rstrip("0").rstrip("."))
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return esc(f"{value:,}")
    if isinstance(value, dict | list):
        return f"<code>{esc(json.dumps(value, ensure_ascii=False, default=str))}</code>"
    return esc(value)


def _missing(value: Any) -> bool:
    from dataspace.report.page import is_missing

    return value is None or value == "" or is_missing(value)


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
    failures = (run_meta or {}).get("infra_failures")
    if isinstance(failures, list) and failures:
        items = "".join(
            f"<li><code>{esc(f.get('code') if isinstance(f, Mapping) else '')}"
            f"</code> {esc(f.get('error') if isinstance(f, Mapping) else f)}</li>"
            for f in failures
        )
        rows.append(f"<tr><th>infrastructure failures (retried)</th><td><ol>{items}</ol></td></tr>")
    return f'<table id="summary">{"".join(rows)}</table>' if rows else ""


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
            attempt; only safe data URLs are kept.
        notes: lines shown at the top (files that could not be read).
    """
    status = (row or {}).get("status") or (run_meta or {}).get("end_state") or ""
    passed = (row or {}).get("passed")
    verdict = ""
    if passed is True:
        verdict = '<span class="badge ok">correct</span>'
    elif passed is False:
        verdict = '<span class="badge bad">incorrect</span>'
    back = f'<a id="back" href="{esc(back_href)}">← report</a> ' if back_href else ""
    header = (
        f'<header class="top"><h1>{esc(title)}</h1><div class="sub">{back}{verdict}'
        f'<span class="badge">{esc(status)}</span> <span id="counts"></span></div>'
        "</header>"
    )
    v = (row or {}).get("verdict")
    if isinstance(v, str):
        with contextlib.suppress(ValueError):
            v = json.loads(v)
    verdict_block = ""
    if v:
        verdict_block = (
            "<details><summary>evaluator verdict</summary><pre>"
            f"{esc(json.dumps(v, ensure_ascii=False, indent=1, default=str))}"
            "</pre></details>"
        )
    safe_images = {p: u for p, u in (images or {}).items() if safe_image_url(u)}
    body = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    body += (
        f"<h2>Attempt</h2>{summary_html(row, run_meta)}{verdict_block}"
        '<div id="turns-section"></div><h2>Timeline</h2>'
        '<noscript><p class="note">The timeline is drawn by the page\'s script; '
        "enable JavaScript to see it.</p></noscript>"
        '<div id="timeline"></div>'
        '<script type="application/octet-stream" id="trace-events" '
        f'data-encoding="zlib+base64">{pack_events(events)}</script>'
        '<script type="application/json" id="trace-images">'
        f"{script_json(json.dumps(safe_images))}</script>"
        f"<script>{_VIEWER_JS_PAGE}</script>"
    )
    return page(title, body, header=header)


VIEWER_JS = r"""
(function () {
  'use strict';
  var SAFE_IMG = /^data:image\/(png|jpeg|jpg|gif|webp);base64,[A-Za-z0-9+\/=\s]+$/;
  var MAX = 60000;
  var root = document.getElementById('timeline');
  var images = {};
  try {
    images = JSON.parse(document.getElementById('trace-images').textContent || '{}') || {};
  } catch (e) { images = {}; }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c) { parent.appendChild(c); }
    }
    return parent;
  }
  function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }
  function num(v) { return typeof v === 'number' && isFinite(v); }
  function str(v) {
    if (typeof v === 'string') { return v; }
    try { return JSON.stringify(v, null, 1); } catch (e) { return String(v); }
  }
  function clip(s) {
    if (s.length <= MAX) { return s; }
    var h = Math.floor(MAX * 2 / 3), t = MAX - h;
    return s.slice(0, h) + '\n[... ' + (s.length - h - t) + ' characters omitted ...]\n' +
      s.slice(s.length - t);
  }
  function pre(v, cls) { return el('pre', cls, clip(str(v))); }
  function thousands(v) { return num(v) ? Math.round(v).toLocaleString('en-US') : '-'; }
  function secs(v) { return num(v) ? v.toFixed(2) : '-'; }
  function when(ev) { return num(ev.t) ? 't=' + ev.t.toFixed(2) + ' s' : 't=?'; }
  function badge(text, cls) { return el('span', 'badge' + (cls ? ' ' + cls : ''), text); }

  function kv(obj, skip) {
    var table = el('table', 'kv'), any = false;
    Object.keys(obj).forEach(function (k) {
      if (skip && skip.indexOf(k) >= 0) { return; }
      var v = obj[k], td = el('td');
      if (typeof v === 'string' && v.length <= 200 && v.indexOf('\n') < 0) {
        td.appendChild(el('code', null, v));
      } else if (v === null || typeof v !== 'object') {
        td.appendChild(el('code', null, JSON.stringify(v)));
      } else {
        td.appendChild(pre(v));
      }
      add(table, add(el('tr'), el('th', null, k), td));
      any = true;
    });
    return any ? table : null;
  }

  function image(url, path) {
    var src = null;
    if (typeof url === 'string' && SAFE_IMG.test(url)) { src = url; }
    if (!src && typeof path === 'string' && typeof images[path] === 'string' &&
        SAFE_IMG.test(images[path])) { src = images[path]; }
    var label = typeof path === 'string' ? path : 'inline image';
    if (!src) {
      return el('p', 'muted', label + ' (image not embedded: not kept with the trace)');
    }
    var img = el('img', 'trace');
    img.alt = label;
    img.src = src;
    return img;
  }

  function content(c) {
    var box = el('div');
    if (c === null || c === undefined) { return null; }
    if (typeof c === 'string') { return pre(c); }
    if (Array.isArray(c)) {
      c.forEach(function (part) {
        if (isObj(part) && part.type === 'text') {
          box.appendChild(pre(part.text === undefined ? '' : part.text));
        } else if (isObj(part) && (part.type === 'image_url' || part.type === 'image')) {
          var u = part.image_url;
          if (isObj(u)) { u = u.url; }
          box.appendChild(image(u || part.url, part.path));
        } else {
          box.appendChild(pre(part));
        }
      });
      return box;
    }
    return pre(c);
  }

  function parseArgs(a) {
    if (typeof a !== 'string') { return a; }
    try { return JSON.parse(a); } catch (e) { return a; }
  }

  function toolCalls(calls) {
    if (!Array.isArray(calls) || !calls.length) { return null; }
    var box = el('div');
    calls.forEach(function (call) {
      if (!isObj(call)) { box.appendChild(pre(call)); return; }
      var fn = isObj(call['function']) ? call['function'] : call;
      var args = parseArgs(fn.arguments !== undefined ? fn.arguments : fn.input);
      var line = add(el('div', 'msg'), el('span', 'role', 'tool call → ' + str(fn.name || '?')));
      if (isObj(args) && typeof args.command === 'string' &&
          Object.keys(args).every(function (k) { return k === 'command' || k === 'timeout'; })) {
        line.appendChild(pre(args.command));
        if (args.timeout !== undefined) { line.appendChild(badge('timeout ' + str(args.timeout))); }
      } else if (args !== undefined) {
        line.appendChild(pre(args));
      }
      box.appendChild(line);
    });
    return box;
  }

  function message(m) {
    if (!isObj(m)) { return pre(m); }
    var role = typeof m.role === 'string' ? m.role : '?';
    var extra = m.tool_call_id ? ' (result of ' + str(m.name || m.tool_call_id) + ')' : '';
    var box = add(el('div', 'msg'), el('span', 'role', role + extra), content(m.content),
                  toolCalls(m.tool_calls));
    if (role === 'tool') {
      return add(el('details'), el('summary', null, 'tool result as the model saw it' + extra),
                 box);
    }
    return box;
  }

  function replyOf(resp) {
    if (isObj(resp) && Array.isArray(resp.choices) && resp.choices.length &&
        isObj(resp.choices[0]) && resp.choices[0].message !== undefined) {
      return resp.choices[0].message;
    }
    if (typeof resp === 'string') { return {role: 'assistant', content: resp}; }
    return resp;
  }

  function same(a, b) {
    if (!isObj(a) || !isObj(b)) { return false; }
    return JSON.stringify([a.content, a.tool_calls]) === JSON.stringify([b.content, b.tool_calls]);
  }

  function pick(u, names) {
    for (var i = 0; i < names.length; i++) {
      var cur = u, parts = names[i].split('.');
      for (var j = 0; j < parts.length && isObj(cur); j++) { cur = cur[parts[j]]; }
      if (num(cur)) { return cur; }
    }
    return null;
  }
  function usageOf(ev) {
    var u = isObj(ev.usage) ? ev.usage : {};
    return {
      input: pick(u, ['input_tokens', 'prompt_tokens']),
      cached: pick(u, ['cached_input_tokens', 'cached_tokens',
                       'prompt_tokens_details.cached_tokens']),
      output: pick(u, ['output_tokens', 'completion_tokens']),
      reasoning: pick(u, ['reasoning_tokens', 'completion_tokens_details.reasoning_tokens']),
      cost: pick(u, ['cost_usd', 'cost'])
    };
  }
  function usageLine(u, latency) {
    var bits = [];
    if (u.input !== null) {
      var cached = u.cached ? ' (cached ' + thousands(u.cached) + ')' : '';
      bits.push('in ' + thousands(u.input) + cached);
    }
    if (u.output !== null) {
      bits.push('out ' + thousands(u.output) +
                (u.reasoning ? ' (reasoning ' + thousands(u.reasoning) + ')' : ''));
    }
    if (u.cost !== null) { bits.push('$' + u.cost.toFixed(5)); }
    if (num(latency)) { bits.push('latency ' + latency.toFixed(2) + ' s'); }
    return bits.join(' · ');
  }

  var state = {turn: 0, seen: 0, last: null, turns: [], tools: 0, fallbacks: 0};

  function card(cls, id, title) {
    var sec = el('section', 'ev ' + cls);
    sec.id = id;
    var h = el('h3');
    (Array.isArray(title) ? title : [title]).forEach(function (t) {
      h.appendChild(typeof t === 'string' ? document.createTextNode(t) : t);
    });
    sec.appendChild(h);
    return sec;
  }

  var handlers = {
    model_call: function (ev, i) {
      state.turn += 1;
      var n = state.turn, u = usageOf(ev), reply = replyOf(ev.response);
      var calls = isObj(reply) && Array.isArray(reply.tool_calls) ? reply.tool_calls.length : 0;
      state.turns.push({turn: n, t: ev.t, latency: ev.latency, u: u, calls: calls});
      var line = usageLine(u, ev.latency);
      var sec = card('model', 'turn-' + n, 'Turn ' + n + ' · ' + when(ev) +
                     (line ? ' · ' + line : ''));
      var msgs = ev.messages;
      if (Array.isArray(msgs)) {
        var fresh, note = '';
        if (msgs.length >= state.seen) { fresh = msgs.slice(state.seen); }
        else { fresh = msgs; note = ' (the context was rewritten: all messages shown)'; }
        if (fresh.length && state.last !== null && same(fresh[0], state.last)) {
          fresh = fresh.slice(1);
        }
        state.seen = msgs.length;
        if (fresh.length) {
          var d = el('details');
          if (n === 1) { d.open = true; }
          d.appendChild(el('summary', null, 'input: ' + fresh.length + ' new message(s)' + note));
          fresh.forEach(function (m) { d.appendChild(message(m)); });
          sec.appendChild(d);
        }
      }
      if (reply !== undefined && reply !== null) {
        if (isObj(reply)) {
          ['reasoning_content', 'reasoning'].forEach(function (k) {
            if (typeof reply[k] === 'string' && reply[k].trim()) {
              sec.appendChild(add(el('details'), el('summary', null, 'reasoning'), pre(reply[k])));
            }
          });
          var r = {};
          Object.keys(reply).forEach(function (k) { r[k] = reply[k]; });
          if (typeof r.role !== 'string') { r.role = 'assistant'; }
          sec.appendChild(message(r));
        } else {
          sec.appendChild(pre(reply));
        }
        state.last = reply;
      }
      if (ev.error) { sec.appendChild(el('p', 'bad', str(ev.error))); }
      var rest = {};
      Object.keys(ev).forEach(function (k) {
        if (['t', 'type', 'messages', 'response', 'usage', 'latency', 'error'].indexOf(k) < 0) {
          rest[k] = ev[k];
        }
      });
      var more = kv(rest);
      if (more) { sec.appendChild(add(el('details'), el('summary', null, 'more fields'), more)); }
      return sec;
    },
    tool: function (ev, i) {
      state.tools += 1;
      var title = ['Tool ' + str(ev.name || 'tool') + ' · ' + when(ev) + ' '];
      if (ev.exit_code !== undefined && ev.exit_code !== null) {
        title.push(badge('exit ' + str(ev.exit_code), ev.exit_code === 0 ? 'ok' : 'bad'));
      }
      if (ev.timed_out) { title.push(badge('timed out', 'bad')); }
      if (num(ev.duration)) { title.push(badge(ev.duration.toFixed(2) + ' s')); }
      var sec = card('tool', 'ev-' + i, title);
      if (ev.command !== undefined) { sec.appendChild(pre(ev.command)); }
      if (ev.arguments !== undefined) {
        sec.appendChild(toolCalls([{name: ev.name, arguments: ev.arguments}]));
      }
      ['stdout', 'stderr', 'output', 'observation'].forEach(function (s) {
        if (ev[s]) {
          var role = el('span', 'role' + (s === 'stderr' ? ' bad' : ''), s);
          sec.appendChild(add(el('div', 'msg'), role, pre(ev[s])));
        }
      });
      if (ev.data_url || typeof ev.image === 'string') {
        sec.appendChild(image(ev.data_url, ev.image || ev.path));
      }
      var skip = ['t', 'type', 'name', 'command', 'arguments', 'exit_code', 'timed_out',
                  'duration', 'stdout', 'stderr', 'output', 'observation', 'data_url', 'image'];
      add(sec, kv(ev, skip));
      return sec;
    },
    image: function (ev, i) {
      var sec = card('image', 'ev-' + i, 'Image · ' + when(ev));
      sec.appendChild(image(ev.data_url, ev.path));
      add(sec, kv(ev, ['t', 'type', 'data_url']));
      return sec;
    },
    submit: function (ev, i) {
      return add(card('submit', 'ev-' + i, 'Submitted · ' + when(ev)), kv(ev, ['t', 'type']));
    },
    error: function (ev, i) {
      var sec = card('error', 'ev-' + i, [el('span', 'bad', 'Error'), ' · ' + when(ev)]);
      var text = ev.message !== undefined ? ev.message : ev.error;
      sec.appendChild(pre(text === undefined ? '' : text));
      add(sec, kv(ev, ['t', 'type', 'message', 'error']));
      return sec;
    }
  };

  function generic(ev, i) {
    var label = isObj(ev) && ev.type !== undefined ? str(ev.type) : 'event';
    var sec = card('other', 'ev-' + i, label + ' · ' + (isObj(ev) ? when(ev) : ''));
    if (isObj(ev)) { add(sec, kv(ev, ['t', 'type'])); } else { sec.appendChild(pre(ev)); }
    return sec;
  }

  function render(ev, i) {
    var h = isObj(ev) && typeof ev.type === 'string' &&
      Object.prototype.hasOwnProperty.call(handlers, ev.type) ? handlers[ev.type] : null;
    if (h) {
      try { return h(ev, i); } catch (e) {
        state.fallbacks += 1;
        var g = generic(ev, i);
        g.setAttribute('data-fallback', String(e && e.message ? e.message : e));
        return g;
      }
    }
    return generic(ev, i);
  }

  function turnsTable() {
    if (!state.turns.length) { return null; }
    var table = el('table'), head = el('tr');
    table.id = 'turns';
    ['turn', 't (s)', 'latency (s)', 'input', 'cached', 'output', 'reasoning', 'cost (USD)',
     'tool calls'].forEach(function (h, j) { head.appendChild(el('th', j ? 'n' : null, h)); });
    add(table, add(el('thead'), head));
    var body = el('tbody'), tot = {input: 0, cached: 0, output: 0, reasoning: 0, cost: 0};
    state.turns.forEach(function (r) {
      Object.keys(tot).forEach(function (k) { tot[k] += r.u[k] || 0; });
      var a = el('a', null, String(r.turn));
      a.href = '#turn-' + r.turn;
      var tr = add(el('tr'), add(el('td'), a));
      [secs(r.t), secs(r.latency), thousands(r.u.input), thousands(r.u.cached),
       thousands(r.u.output), thousands(r.u.reasoning),
       r.u.cost === null ? '-' : r.u.cost.toFixed(5), String(r.calls)]
        .forEach(function (v) { tr.appendChild(el('td', 'n', v)); });
      body.appendChild(tr);
    });
    var total = add(el('tr'), el('th', null, 'total'), el('td'), el('td'));
    [thousands(tot.input), thousands(tot.cached), thousands(tot.output),
     thousands(tot.reasoning), tot.cost.toFixed(5), '']
      .forEach(function (v) { total.appendChild(el('td', 'n', v)); });
    body.appendChild(total);
    table.appendChild(body);
    return add(el('div', 'wrap'), table);
  }

  function renderAll(raw) {
    var count = 0;
    raw.split('\n').forEach(function (line, k) {
      if (!line.trim()) { return; }
      var ev;
      try { ev = JSON.parse(line); } catch (e) {
        var sec = card('error', 'ev-' + count, 'Line ' + (k + 1) + ' is not JSON');
        sec.appendChild(pre(line));
        root.appendChild(sec);
        count += 1;
        return;
      }
      root.appendChild(render(ev, count));
      count += 1;
    });
    if (!count) { root.appendChild(el('p', 'muted', 'No events were recorded for this attempt.')); }
    var turns = turnsTable();
    if (turns) {
      add(document.getElementById('turns-section'), el('h2', null, 'Usage and timing per turn'),
          turns);
    }
    document.getElementById('counts').textContent = count + ' events · ' + state.turn +
      ' model turns · ' + state.tools + ' tool events';
    document.body.setAttribute('data-fallbacks', String(state.fallbacks));
    document.body.setAttribute('data-rendered', String(count));
  }

  function fail(message) {
    root.appendChild(el('p', 'note', message));
    document.body.setAttribute('data-rendered', 'failed');
  }

  // the log is embedded zlib-compressed and base64-encoded (see dataspace.report.trace)
  var data = (document.getElementById('trace-events').textContent || '').replace(/\s+/g, '');
  if (!data) {
    renderAll('');
  } else if (typeof DecompressionStream === 'undefined') {
    fail('This browser cannot decompress the trace (no DecompressionStream); ' +
         'open the page in a current browser.');
  } else {
    var bin = null;
    try { bin = atob(data); } catch (e) { fail('The embedded trace is damaged.'); }
    if (bin !== null) {
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) { bytes[i] = bin.charCodeAt(i); }
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
      new Response(stream).text().then(renderAll, function (e) {
        fail('The embedded trace could not be decompressed: ' + e);
      });
    }
  }
}());
"""

# what pages embed: the same script without indentation (only leading blanks go, line
# breaks stay, so the code is unchanged)
_VIEWER_JS_PAGE = "\n".join(line.strip() for line in VIEWER_JS.splitlines() if line.strip())


__all__ = [
    "VIEWER_JS",
    "image_paths",
    "pack_events",
    "render_trace",
    "safe_image_url",
    "script_json",
    "summary_html",
]
