r"""The attempt trace: one versioned event schema, written by every harness, read by the viewer.

Every attempt leaves ``attempts/<agent>/<task>/<n>/events.jsonl``: one JSON object per line,
appended as things happen. Every event has

- ``t``: seconds since the attempt started (a float; events are in time order);
- ``type``: one of the types below.

The first event of an attempt is ``attempt_start`` and carries ``schema``
(:data:`TRACE_SCHEMA`, ``"dataspace.trace/1"``). A reader accepts any event it does not know
(it is shown as its fields) and any field it does not know, so a harness may add both; it
must not change the meaning of a field listed here. A line that is not JSON is kept as text.

Event types (fields beyond ``t`` and ``type``; all optional unless marked *required*):

``attempt_start``
    ``schema`` (required), ``task``, ``agent``, ``attempt``, ``try_index``, ``key``,
    ``question``: the task's question as the agent received it.
``agent_start``
    ``harness``, ``model``, ``base_url``, ``prompt_contract``, ``system_prompt`` (the text),
    ``system_prompt_sha256``, ``user_prompt`` (the first user message), ``limits``,
    ``settings``.
``model_retry``
    A failed model request that will be retried (an infrastructure fault of the model
    endpoint): ``retry`` (1, 2, ...), ``error``, ``delay_seconds``, ``request_seconds``.
``model_call``
    One model request that returned, with its metered usage: ``model``, ``input_tokens``,
    ``cached_input_tokens``, ``output_tokens``, ``reasoning_tokens``, ``cost_usd``,
    ``latency_seconds``, ``retries``, ``retry_seconds``, ``queue_seconds``. The token and
    cost fields of all ``model_call`` events of an attempt add up to the attempt's results
    row; every model request a harness makes is metered this way (by
    :class:`dataspace.llm.client.MeteredClient`, also behind the relay of in-sandbox
    harnesses).
``model_turn``
    What the model answered in the latest ``model_call``: ``turn`` (1, 2, ...), ``content``
    (the message text), ``reasoning`` (reasoning text, if the API returns it),
    ``tool_calls`` (a list of ``{"id", "name", "arguments"}``, arguments as the JSON text
    the model wrote), ``finish_reason``, ``response_id``, ``resolved_model``. A harness
    whose stream has no separate usage record may emit ``model_turn`` with the
    ``model_call`` usage fields in it; the reader treats it as both.
``tool_result``
    One executed tool call: ``action`` (1, 2, ...), ``tool_call_id`` (links it to the
    ``model_turn`` call), ``tool``, ``arguments``, ``result``: the observation the model
    received, for ``bash`` ``{"exit_code", "stdout", "stderr", "timed_out",
    "duration_seconds", "stdout_truncated", "stderr_truncated"}``, for failures
    ``{"ok": false, "error_type", "error"}``.
``tool``
    A tool action that no model requested (the ``gold`` harness): ``name``, ``command``,
    ``exit_code``, ``stdout``, ``stderr``, ``path``.
``image``
    An image the model was shown: ``path``, ``data_url`` (``data:image/...;base64,...``),
    ``tool_call_id`` when a tool call produced it.
``protocol_reminder``
    The harness reminded the model of the protocol: ``turn``, ``reason``.
``harness_trace``
    An in-sandbox harness's own record, read after it ended: ``state``, ``steps`` (one per
    model step: ``step_number``, ``model_output``, ``tool_calls`` as
    ``[{"id", "function": {"name", "arguments"}}]``, ``code_action``, ``observations``,
    ``error``, ``plan``), ``error``, ``exit_code``, ``stderr``. The reader pairs the k-th
    step with the k-th ``model_call``.
``submit``
    The agent submitted an answer: ``path``.
``error``
    Something went wrong in the harness: ``message``; with ``severity: "warning"`` a notice
    the harness gave that did not stop it.
``agent_end``
    ``end_state``, ``model_turns``, ``tool_actions``, ``submitted_path``, ``error``,
    ``working_seconds``, ``usage`` (the totals).

Native command-line harnesses (Codex, Claude Code, Grok Build) run their own loop inside
the sandbox; their log holds what the relay saw and what the CLI printed, and
:func:`native_events` (called by :func:`conversation`) reads it in the events above:

``model_call`` from the relay, with ``wire`` (``responses``, ``messages``, ``chat``),
``status``, ``seconds``, the usage fields, ``request`` (the request body as JSON text) and
``raw`` (the reply as it streamed). A call with status 200 becomes ``model_call`` (its
usage; ``seconds`` as ``latency_seconds``) and ``model_turn`` (the message, reasoning and
tool calls parsed from ``raw`` for its wire); any other status is a ``model_retry`` (the
harness retried it; it used no tokens).
``harness_output``
    The CLI's own stream, read after it ended: ``harness``, ``exit_code``, ``timed_out``,
    ``signal``, ``stdout`` (``codex exec --json`` JSON lines, Claude Code's
    ``stream-json``, Grok Build's ``streaming-json``), ``stderr``. Tool calls get their
    outputs from it where it names the call (Claude Code's ``tool_result`` blocks), else
    from the next request (``function_call_output``, ``tool_result``, ``role: tool``
    messages, which hold what the model saw); Codex's ``command_execution`` items add the
    exit code of each shell call, in order. Its errors (``turn.failed``, ``error``, an
    ``is_error`` result) become ``error`` events.
``model_refused``
    The relay refused a model other than the attempt's: ``model``, ``allowed`` (an
    ``error``).

The prompts come from the first request (``instructions`` or ``system``, and the task's
user message), so the page shows what the CLI sent.

:func:`read_events` parses a log and :func:`conversation` folds it into what the trace
page shows: the question, the prompts, and one entry per model turn with its message, its
tool calls (arguments and output), its usage, latency and the retries before it.

>>> import json
>>> log = "\n".join(json.dumps(e) for e in [
...     {"t": 0, "type": "attempt_start", "schema": TRACE_SCHEMA, "question": "Q?"},
...     {"t": 1, "type": "model_call", "input_tokens": 10, "output_tokens": 2, "cost_usd": 0.1},
...     {"t": 1, "type": "model_turn", "turn": 1,
...      "tool_calls": [{"id": "c1", "name": "bash", "arguments": '{"command": "ls"}'}]},
...     {"t": 2, "type": "tool_result", "tool_call_id": "c1", "tool": "bash",
...      "result": {"exit_code": 0, "stdout": "a.csv"}}])
>>> conv = conversation(read_events(log))
>>> conv["question"], conv["counts"]["turns"], conv["turns"][0]["tool_calls"][0]["output"]
('Q?', 1, 'a.csv')
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

TRACE_SCHEMA = "dataspace.trace/1"
EVENTS_NAME = "events.jsonl"
USAGE_FIELDS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cost_usd",
)
EVENT_TYPES = (
    "attempt_start",
    "agent_start",
    "model_retry",
    "model_call",
    "model_turn",
    "tool_result",
    "tool",
    "image",
    "protocol_reminder",
    "harness_trace",
    "submit",
    "error",
    "agent_end",
)
MAX_TEXT = 200_000  # characters of one text kept for the page (the rest is marked cut)


def read_events(data: bytes | str | None) -> list[dict[str, Any]]:
    r"""The events of a log; a line that is not a JSON object becomes ``{"type": "text"}``.

    >>> read_events(b'{"t": 0, "type": "submit"}\nnot json\n')
    [{'t': 0, 'type': 'submit'}, {'type': 'text', 'line': 2, 'text': 'not json'}]
    """
    if not data:
        return []
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    lines = text.splitlines()
    filled = [line for line in lines if line.strip()]
    try:  # one decoder call for the whole log (the usual case: every line an object)
        whole = json.loads("[" + ",".join(filled) + "]")
    except ValueError:
        whole = None
    if (
        isinstance(whole, list)
        and len(whole) == len(filled)
        and all(type(ev) is dict for ev in whole)
    ):
        return whole
    out: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            ev = None
        if isinstance(ev, dict):
            out.append(ev)
        else:
            out.append({"type": "text", "line": number, "text": line})
    return out


def _num(v: Any) -> float | None:
    kind = type(v)
    if kind is float:
        return v if v == v else None  # NaN is no number
    if kind is int:
        return float(v)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if v == v else None


def _text(v: Any) -> str | None:
    if v is None:
        return None
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, indent=1, default=str)
    if len(s) > MAX_TEXT:
        s = s[:MAX_TEXT] + f"\n[... {len(s) - MAX_TEXT:,} characters not shown ...]"
    return s


def _usage(ev: Mapping[str, Any]) -> dict[str, float] | None:
    found = {k: _num(ev.get(k)) for k in USAGE_FIELDS}
    if all(v is None for v in found.values()):
        return None
    return {k: v or 0.0 for k, v in found.items()}


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _new_turn(n: int, t: Any) -> dict[str, Any]:
    return {
        "n": n,
        "t": _num(t),
        "content": None,
        "reasoning": None,
        "tool_calls": [],
        "usage": None,
        "latency_seconds": None,
        "retries": [],
        "notes": [],
        "has_message": False,
    }


def _tool_output(result: Any) -> dict[str, Any]:
    """Output, exit code and truncation of a ``tool_result`` observation."""
    if not isinstance(result, Mapping):
        return {"output": _text(result), "exit_code": None, "truncated": False, "ok": None}
    stdout, stderr = result.get("stdout"), result.get("stderr")
    parts = [stdout] if isinstance(stdout, str) and stdout else []
    if isinstance(stderr, str) and stderr:
        parts.append(f"[stderr]\n{stderr}")
    if not parts and "exit_code" not in result:  # not a command: the observation itself
        rest = {k: v for k, v in result.items() if k not in ("ok",)}
        parts.append(_text(rest) or "")
    ok = result.get("ok")
    return {
        "output": _text("\n".join(parts)),
        "exit_code": result.get("exit_code"),
        "truncated": bool(result.get("stdout_truncated") or result.get("stderr_truncated")),
        "timed_out": bool(result.get("timed_out")),
        "duration_seconds": _num(result.get("duration_seconds")),
        "ok": ok if isinstance(ok, bool) else None,
        "error": _text(result.get("error")) if ok is False else None,
    }


def _step_calls(step: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = []
    raw = step.get("tool_calls")
    for i, c in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(c, Mapping):
            continue
        fn: Mapping[str, Any] = c["function"] if isinstance(c.get("function"), Mapping) else c
        calls.append(
            {
                "id": str(c.get("id") or f"step{step.get('step_number')}-{i}"),
                "name": str(fn.get("name") or "?"),
                "arguments": _arguments(fn.get("arguments")),
                "output": None,
                "exit_code": None,
                "truncated": False,
            }
        )
    if not calls and step.get("code_action") is not None:
        calls.append(
            {
                "id": f"step{step.get('step_number')}",
                "name": "python",
                "arguments": {"code": step.get("code_action")},
                "output": None,
                "exit_code": None,
                "truncated": False,
            }
        )
    obs = step.get("observations")
    if calls and obs is not None:
        text = _text(obs)
        calls[-1]["output"] = text
        calls[-1]["truncated"] = bool(text and text.endswith("[truncated]"))
    return calls


def conversation(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Fold a log into what a reader follows: prompts, then turn by turn.

    Returns a JSON-ready dict:

    - ``schema``: the log's schema (None for logs older than the schema);
    - ``question``, ``system_prompt``, ``user_prompt``, ``harness``, ``model``;
    - ``items``: in time order, each ``{"kind": "turn", "turn": i}`` (an index into
      ``turns``), ``{"kind": "tool", ...}`` (an action no model asked for),
      ``{"kind": "submit", "path"}``, ``{"kind": "error", "text"}``,
      ``{"kind": "reminder", "text"}``, ``{"kind": "warning", "text"}``,
      ``{"kind": "stream", "harness", "exit_code", "timed_out", "signal", "stdout",
      "stderr"}`` (a native CLI's own output),
      ``{"kind": "retry", ...}`` (a retry after which no
      model call returned) or ``{"kind": "event", "type", "fields"}`` (anything else);
    - ``turns``: per model turn ``n``, ``t``, ``content``, ``reasoning``, ``tool_calls``
      (each with ``id``, ``name``, ``arguments``, ``output``, ``exit_code``, ``truncated``,
      ``images``), ``usage`` (the ``model_call`` fields), ``latency_seconds``, ``retries``;
    - ``totals``: the usage fields summed over the turns, and ``latency_seconds``;
    - ``counts``: ``events``, ``turns``, ``tool_calls``, ``retries``, ``errors``;
    - ``end``: the ``agent_end`` fields, ``submitted``: the submitted path.
    """
    conv: dict[str, Any] = {
        "schema": None,
        "question": None,
        "system_prompt": None,
        "user_prompt": None,
        "harness": None,
        "model": None,
        "items": [],
        "turns": [],
        "end": None,
        "submitted": None,
    }
    n_events = len(events)
    events = native_events(events)
    items: list[dict[str, Any]] = conv["items"]
    turns: list[dict[str, Any]] = conv["turns"]
    pending_retries: list[dict[str, Any]] = []
    calls_by_id: dict[str, dict[str, Any]] = {}
    errors = 0
    retries = 0
    tool_count = 0

    def open_turn(t: Any) -> dict[str, Any]:
        turn = _new_turn(len(turns) + 1, t)
        turn["retries"] = list(pending_retries)
        pending_retries.clear()
        turns.append(turn)
        items.append({"kind": "turn", "turn": len(turns) - 1})
        return turn

    def current() -> dict[str, Any] | None:
        return turns[-1] if turns else None

    def set_message(turn: dict[str, Any], ev: Mapping[str, Any]) -> None:
        nonlocal tool_count
        turn["has_message"] = True
        turn["content"] = _text(ev.get("content")) if ev.get("content") else None
        reasoning = ev.get("reasoning") or ev.get("reasoning_content")
        turn["reasoning"] = _text(reasoning) if reasoning else None
        turn["finish_reason"] = ev.get("finish_reason")
        for i, c in enumerate(ev.get("tool_calls") or []):
            if not isinstance(c, Mapping):
                continue
            fn: Mapping[str, Any] = c["function"] if isinstance(c.get("function"), Mapping) else c
            call = {
                "id": str(c.get("id") or f"turn{turn['n']}-{i}"),
                "name": str(fn.get("name") or "?"),
                "arguments": _arguments(fn.get("arguments", fn.get("input"))),
                "output": None,
                "exit_code": None,
                "truncated": False,
                "images": [],
            }
            turn["tool_calls"].append(call)
            calls_by_id[call["id"]] = call
            tool_count += 1

    def set_usage(turn: dict[str, Any], ev: Mapping[str, Any]) -> None:
        turn["usage"] = _usage(ev)
        turn["latency_seconds"] = _num(ev.get("latency_seconds"))
        if turn["t"] is None:
            turn["t"] = _num(ev.get("t"))

    for ev in events:
        kind = ev.get("type")
        if kind == "model_call":
            turn = current()
            if turn is None or turn["usage"] is not None or turn["has_message"]:
                turn = open_turn(ev.get("t"))
            set_usage(turn, ev)
        elif kind == "model_turn":
            turn = current()
            if turn is None or turn["has_message"]:
                turn = open_turn(ev.get("t"))
            if turn["usage"] is None and _usage(ev) is not None:
                set_usage(turn, ev)
            set_message(turn, ev)
        elif kind == "tool_result":
            call = calls_by_id.get(str(ev.get("tool_call_id")))
            if call is None:
                turn = current()
                if turn is None:
                    turn = open_turn(ev.get("t"))
                call = {
                    "id": str(ev.get("tool_call_id") or f"action{ev.get('action')}"),
                    "name": str(ev.get("tool") or "?"),
                    "arguments": _arguments(ev.get("arguments")),
                    "images": [],
                }
                turn["tool_calls"].append(call)
                tool_count += 1
            call.update(_tool_output(ev.get("result")))
            call["t"] = _num(ev.get("t"))
        elif kind == "attempt_start":
            conv["schema"] = ev.get("schema")
            conv["question"] = ev.get("question")
        elif kind == "agent_start":
            conv["harness"] = ev.get("harness")
            conv["model"] = ev.get("model")
            conv["system_prompt"] = ev.get("system_prompt")
            conv["user_prompt"] = ev.get("user_prompt")
            conv["system_prompt_sha256"] = ev.get("system_prompt_sha256")
        elif kind == "model_retry":
            retries += 1
            pending_retries.append(
                {
                    "t": _num(ev.get("t")),
                    "retry": ev.get("retry"),
                    "error": _text(ev.get("error")),
                    "delay_seconds": _num(ev.get("delay_seconds")),
                }
            )
        elif kind == "image":
            call = calls_by_id.get(str(ev.get("tool_call_id")))
            image = {"path": ev.get("path"), "data_url": ev.get("data_url")}
            if call is not None:
                call.setdefault("images", []).append(image)
            else:
                items.append({"kind": "image", "t": _num(ev.get("t")), **image})
        elif kind == "tool":
            tool_count += 1
            out = {k: ev.get(k) for k in ("stdout", "stderr") if ev.get(k)}
            items.append(
                {
                    "kind": "tool",
                    "t": _num(ev.get("t")),
                    "name": str(ev.get("name") or "tool"),
                    "arguments": ev.get("command") if ev.get("command") else ev.get("path"),
                    **_tool_output(out or None),
                    "exit_code": ev.get("exit_code"),
                }
            )
        elif kind == "protocol_reminder":
            items.append({"kind": "reminder", "t": _num(ev.get("t")), "text": ev.get("reason")})
        elif kind == "harness_trace":
            steps = [  # the task step (the prompt) carries none of these and is no turn
                s
                for s in ev.get("steps") or []
                if isinstance(s, Mapping)
                and any(s.get(k) for k in ("model_output", "tool_calls", "code_action", "plan"))
            ]
            waiting = [t for t in turns if not t["has_message"]]
            for k, step in enumerate(steps):
                turn = waiting[k] if k < len(waiting) else open_turn(ev.get("t"))
                turn["has_message"] = True
                turn["content"] = _text(step.get("model_output") or step.get("plan"))
                turn["tool_calls"] = _step_calls(step)
                tool_count += len(turn["tool_calls"])
                if step.get("error"):
                    turn["notes"].append(_text(step.get("error")))
            if ev.get("error"):
                errors += 1
                items.append({"kind": "error", "t": _num(ev.get("t")), "text": _text(ev["error"])})
        elif kind == "harness_output":
            items.append(
                {
                    "kind": "stream",
                    "t": _num(ev.get("t")),
                    "harness": ev.get("harness"),
                    "exit_code": ev.get("exit_code"),
                    "timed_out": bool(ev.get("timed_out")),
                    "signal": ev.get("signal"),
                    "stdout": _text(ev.get("stdout")) or "",
                    "stderr": _text(ev.get("stderr")) or "",
                }
            )
        elif kind == "submit":
            conv["submitted"] = ev.get("path")
            items.append({"kind": "submit", "t": _num(ev.get("t")), "path": ev.get("path")})
        elif kind == "error" and ev.get("severity") == "warning":
            items.append(
                {"kind": "warning", "t": _num(ev.get("t")), "text": _text(ev.get("message"))}
            )
        elif kind == "error":
            errors += 1
            items.append(
                {
                    "kind": "error",
                    "t": _num(ev.get("t")),
                    "text": _text(ev.get("message", ev.get("error"))),
                }
            )
        elif kind == "agent_end":
            conv["end"] = {k: v for k, v in ev.items() if k not in ("t", "type")}
            if ev.get("submitted_path") and not conv["submitted"]:
                conv["submitted"] = ev.get("submitted_path")
            if ev.get("error"):
                errors += 1
        else:
            fields = {k: v for k, v in ev.items() if k not in ("t", "type")}
            items.append(
                {
                    "kind": "event",
                    "t": _num(ev.get("t")),
                    "type": str(kind) if kind is not None else "event",
                    "fields": fields,
                }
            )
    for r in pending_retries:
        items.append({"kind": "retry", **r})
    totals = dict.fromkeys(USAGE_FIELDS, 0.0)
    latency = 0.0
    for turn in turns:
        for name in USAGE_FIELDS:
            totals[name] += (turn["usage"] or {}).get(name, 0.0)
        latency += turn["latency_seconds"] or 0.0
        del turn["has_message"]
    conv["totals"] = {**totals, "latency_seconds": latency}
    conv["counts"] = {
        "events": n_events,
        "turns": len(turns),
        "tool_calls": tool_count,
        "retries": retries,
        "errors": errors,
    }
    return conv


# ---- native command-line streams ------------------------------------------------------------

NATIVE_SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command", "local_shell", "Bash"})


def _sse_data(raw: str) -> list[dict[str, Any]]:
    """The JSON objects of a server-sent-event stream, or the one JSON reply."""
    text = raw.strip()
    if text.startswith("{"):
        try:
            one = json.loads(text)
        except ValueError:
            one = None
        if isinstance(one, dict):
            return [one]
    out = []
    for line in raw.splitlines():
        if not line.startswith("data:"):
            continue
        try:
            v = json.loads(line[5:].strip())
        except ValueError:
            continue
        if isinstance(v, dict):
            out.append(v)
    return out


def _blocks_text(
    content: Any, kinds: tuple[str, ...] = ("text", "input_text", "output_text")
) -> str:
    """The text of a message's content (a string or a list of typed blocks)."""
    if isinstance(content, str):
        return content
    parts = []
    for b in content if isinstance(content, list) else []:
        if isinstance(b, Mapping) and b.get("type") in kinds and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif isinstance(b, str):
            parts.append(b)
    return "\n".join(parts)


def _reply_responses(data: list[dict[str, Any]]) -> dict[str, Any]:
    items: list[Any] = []
    final = next(
        (
            d["response"]
            for d in reversed(data)
            if isinstance(d.get("response"), Mapping)
            and d.get("type") in ("response.completed", "response.incomplete", "response.failed")
        ),
        None,
    )
    if final is None and data and "output" in data[0]:  # a reply that was not streamed
        final = data[0]
    if final is not None and isinstance(final.get("output"), list) and final["output"]:
        items = final["output"]
    else:
        items = [d["item"] for d in data if d.get("type") == "response.output_item.done"]
    content, reasoning, calls = [], [], []
    for it in items:
        if not isinstance(it, Mapping):
            continue
        kind = it.get("type")
        if kind == "message":
            content.append(_blocks_text(it.get("content")))
        elif kind == "reasoning":
            reasoning.append(_blocks_text(it.get("summary"), ("summary_text", "text")))
            reasoning.append(_blocks_text(it.get("content"), ("reasoning_text", "text")))
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(
                {
                    "id": it.get("call_id") or it.get("id"),
                    "name": it.get("name"),
                    "arguments": it.get("arguments", it.get("input")),
                }
            )
        elif kind == "local_shell_call":
            calls.append(
                {
                    "id": it.get("call_id") or it.get("id"),
                    "name": "local_shell",
                    "arguments": it.get("action"),
                }
            )
    status = (final or {}).get("incomplete_details") or (final or {}).get("error")
    return {
        "content": "\n".join(c for c in content if c) or None,
        "reasoning": "\n".join(r for r in reasoning if r) or None,
        "tool_calls": calls,
        "finish_reason": (final or {}).get("status") if not status else json.dumps(status),
        "response_id": (final or {}).get("id"),
        "resolved_model": (final or {}).get("model"),
    }


def _reply_messages(data: list[dict[str, Any]]) -> dict[str, Any]:
    msg: Mapping[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    stop = None
    if data and data[0].get("type") == "message":  # a reply that was not streamed
        msg = data[0]
        blocks = {
            i: dict(b) for i, b in enumerate(msg.get("content") or []) if isinstance(b, Mapping)
        }
        stop = msg.get("stop_reason")
    for d in data:
        kind = d.get("type")
        if kind == "message_start" and isinstance(d.get("message"), Mapping):
            msg = d["message"]
        elif kind == "content_block_start" and isinstance(d.get("content_block"), Mapping):
            blocks[int(d.get("index") or 0)] = {**d["content_block"], "_json": ""}
        elif kind == "content_block_delta" and isinstance(d.get("delta"), Mapping):
            b = blocks.setdefault(int(d.get("index") or 0), {"type": "text", "_json": ""})
            delta = d["delta"]
            if delta.get("type") == "text_delta":
                b["text"] = b.get("text", "") + str(delta.get("text", ""))
            elif delta.get("type") == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + str(delta.get("thinking", ""))
            elif delta.get("type") == "input_json_delta":
                b["_json"] = b.get("_json", "") + str(delta.get("partial_json", ""))
        elif kind == "message_delta" and isinstance(d.get("delta"), Mapping):
            stop = d["delta"].get("stop_reason", stop)
    content, reasoning, calls = [], [], []
    for _, b in sorted(blocks.items()):
        if b.get("type") == "text":
            content.append(str(b.get("text") or ""))
        elif b.get("type") in ("thinking", "redacted_thinking"):
            reasoning.append(str(b.get("thinking") or "[redacted thinking]"))
        elif b.get("type") in ("tool_use", "server_tool_use"):
            args = b.get("_json") or b.get("input")
            calls.append({"id": b.get("id"), "name": b.get("name"), "arguments": args})
    return {
        "content": "\n".join(c for c in content if c) or None,
        "reasoning": "\n".join(r for r in reasoning if r) or None,
        "tool_calls": calls,
        "finish_reason": stop,
        "response_id": msg.get("id"),
        "resolved_model": msg.get("model"),
    }


def _reply_chat(data: list[dict[str, Any]]) -> dict[str, Any]:
    content, reasoning = [], []
    calls: dict[int, dict[str, Any]] = {}
    finish = rid = model = None
    for d in data:
        rid, model = d.get("id", rid), d.get("model", model)
        for ch in d.get("choices") or []:
            if not isinstance(ch, Mapping):
                continue
            part = ch.get("delta") if isinstance(ch.get("delta"), Mapping) else ch.get("message")
            part = part if isinstance(part, Mapping) else {}
            finish = ch.get("finish_reason") or finish
            if isinstance(part.get("content"), str):
                content.append(part["content"])
            r = part.get("reasoning_content") or part.get("reasoning")
            if isinstance(r, str):
                reasoning.append(r)
            for k, tc in enumerate(part.get("tool_calls") or []):
                if not isinstance(tc, Mapping):
                    continue
                fn: Mapping[str, Any] = (
                    tc["function"] if isinstance(tc.get("function"), Mapping) else {}
                )
                c = calls.setdefault(
                    int(tc.get("index", k)), {"id": None, "name": "", "arguments": ""}
                )
                c["id"] = tc.get("id") or c["id"]
                c["name"] += str(fn.get("name") or "")
                c["arguments"] += str(fn.get("arguments") or "")
    return {
        "content": "".join(content) or None,
        "reasoning": "".join(reasoning) or None,
        "tool_calls": [c for _, c in sorted(calls.items())],
        "finish_reason": finish,
        "response_id": rid,
        "resolved_model": model,
    }


_REPLY = {"responses": _reply_responses, "messages": _reply_messages, "chat": _reply_chat}


def _request_view(wire: str, body: Any) -> dict[str, Any]:
    """System prompt, first user message and tool outputs (by call id) of a request."""
    view: dict[str, Any] = {"system": None, "user": None, "outputs": {}}
    if not isinstance(body, Mapping):
        return view
    users: list[str] = []
    if wire == "responses":
        view["system"] = (
            body.get("instructions") if isinstance(body.get("instructions"), str) else None
        )
        for it in body.get("input") or []:
            if not isinstance(it, Mapping):
                continue
            if it.get("type") in (
                "function_call_output",
                "custom_tool_call_output",
                "local_shell_call_output",
            ):
                out = it.get("output")
                view["outputs"][str(it.get("call_id"))] = (
                    out if isinstance(out, str) else _blocks_text(out) or _text(out)
                )
            elif it.get("role") == "user":
                users.append(_blocks_text(it.get("content")))
        view["user"] = users[-1] if users else None  # the task prompt comes after the context
    elif wire == "messages":
        system = body.get("system")
        view["system"] = _blocks_text(system) or None
        for m in body.get("messages") or []:
            if not isinstance(m, Mapping) or m.get("role") != "user":
                continue
            content = m.get("content")
            for b in content if isinstance(content, list) else []:
                if isinstance(b, Mapping) and b.get("type") == "tool_result":
                    view["outputs"][str(b.get("tool_use_id"))] = {
                        "text": _blocks_text(b.get("content")),
                        "error": bool(b.get("is_error")),
                    }
            text = _blocks_text(content)
            if text and view["user"] is None:
                view["user"] = text
    else:
        for m in body.get("messages") or []:
            if not isinstance(m, Mapping):
                continue
            if m.get("role") == "system" and view["system"] is None:
                view["system"] = _blocks_text(m.get("content"))
            elif m.get("role") == "user" and view["user"] is None:
                view["user"] = _blocks_text(m.get("content"))
            elif m.get("role") == "tool":
                view["outputs"][str(m.get("tool_call_id"))] = _blocks_text(m.get("content"))
    return view


def _stream_results(
    harness: Any, stdout: Any
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str], list[str]]:
    """Tool results by call id, command executions in order, errors and warnings."""
    by_id: dict[str, Any] = {}
    commands: list[dict[str, Any]] = []
    errors: list[str] = []
    warnings: list[str] = []
    for ev in read_events(stdout if isinstance(stdout, str) else None):
        kind = ev.get("type")
        item = ev.get("item")
        if kind == "item.completed" and isinstance(item, Mapping):  # codex exec --json
            if item.get("type") == "command_execution":
                commands.append(dict(item))
            elif item.get("type") == "error" and item.get("message"):  # a non-fatal notice
                warnings.append(str(item["message"]))
        elif kind == "turn.failed":
            err = ev.get("error")
            errors.append(str(err.get("message") if isinstance(err, Mapping) else err))
        elif kind == "error" and ev.get("message"):
            errors.append(str(ev["message"]))
        elif kind == "user" and isinstance(ev.get("message"), Mapping):  # claude stream-json
            content = ev["message"].get("content")
            for b in content if isinstance(content, list) else []:
                if isinstance(b, Mapping) and b.get("type") == "tool_result":
                    by_id[str(b.get("tool_use_id"))] = {
                        "text": _blocks_text(b.get("content")),
                        "error": bool(b.get("is_error")),
                    }
        elif kind == "result" and ev.get("is_error"):
            errors.append(str(ev.get("result") or ev.get("subtype") or "the harness failed"))
    return by_id, commands, errors, warnings


def native_events(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A native CLI's log in the schema's own events (see the module docstring).

    Logs without relay calls (``model_call`` events carrying ``wire``) come back as they are.
    """
    calls = [e for e in events if e.get("type") == "model_call" and e.get("wire") in _REPLY]
    if not calls:
        return list(events)
    output = next((e for e in events if e.get("type") == "harness_output"), None)
    by_id, commands, stream_errors, stream_warnings = _stream_results(
        (output or {}).get("harness"), (output or {}).get("stdout")
    )
    views = []
    for c in calls:
        try:
            body = json.loads(c["request"]) if isinstance(c.get("request"), str) else None
        except ValueError:
            body = None
        views.append(_request_view(str(c["wire"]), body))
    outputs: dict[str, Any] = {}
    for v in views:
        outputs.update(v["outputs"])
    outputs.update(by_id)  # the harness's own record of what the tool returned wins
    first = views[0]
    out: list[dict[str, Any]] = []
    retry = 0
    shell_calls: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for ev in events:
        kind = ev.get("type")
        if kind == "agent_start":
            out.append(
                {
                    **ev,
                    "system_prompt": ev.get("system_prompt") or first["system"],
                    "user_prompt": ev.get("user_prompt") or first["user"],
                }
            )
        elif kind == "model_call" and ev.get("wire") in _REPLY:
            if ev.get("status") != 200:
                retry += 1
                out.append(
                    {
                        "t": ev.get("t"),
                        "type": "model_retry",
                        "retry": retry,
                        "error": f"HTTP {ev.get('status')} from the endpoint (the harness "
                        f"retried): {str(ev.get('raw') or '')[:300]}",
                        "request_seconds": ev.get("seconds"),
                    }
                )
                continue
            retry = 0
            out.extend(pending)
            pending = []
            reply = _REPLY[str(ev["wire"])](_sse_data(str(ev.get("raw") or "")))
            usage = {k: ev.get(k) for k in USAGE_FIELDS}
            out.append(
                {
                    "t": ev.get("t"),
                    "type": "model_call",
                    "model": ev.get("model"),
                    **usage,
                    "latency_seconds": ev.get("seconds"),
                }
            )
            out.append({"t": ev.get("t"), "type": "model_turn", **reply})
            for call in reply["tool_calls"]:
                result: Any = None
                got = outputs.get(str(call["id"]))
                if isinstance(got, Mapping):
                    result = (
                        {"output": got.get("text")}
                        if not got.get("error")
                        else {"ok": False, "error": got.get("text")}
                    )
                elif got is not None:
                    result = {"output": got}
                tr = {
                    "t": ev.get("t"),
                    "type": "tool_result",
                    "tool_call_id": call["id"],
                    "tool": call["name"],
                    "result": result,
                }
                if call["name"] in NATIVE_SHELL_TOOLS:
                    shell_calls.append(tr)
                pending.append(tr)
        elif kind == "model_refused":
            out.append(
                {
                    "t": ev.get("t"),
                    "type": "error",
                    "message": f"the relay refused model {ev.get('model')!r} "
                    f"(only {ev.get('allowed')!r} may be called)",
                }
            )
        else:
            if kind == "harness_output":
                out.extend(pending)
                pending = []
                for msg in stream_warnings:
                    out.append(
                        {"t": ev.get("t"), "type": "error", "message": msg, "severity": "warning"}
                    )
                for msg in stream_errors:
                    out.append({"t": ev.get("t"), "type": "error", "message": msg})
            out.append(dict(ev))
    out.extend(pending)
    # codex's stream records each command's exit code and output, in order, but not the
    # call it answers; pair them with the shell calls in order
    for tr, cmd in zip(shell_calls, commands, strict=False):
        res = tr["result"] if isinstance(tr["result"], dict) else {}
        text = res.get("output")
        tr["result"] = {
            "exit_code": cmd.get("exit_code"),
            "stdout": cmd.get("aggregated_output") if text is None else text,
        }
    return [_flat_result(e) for e in out]


def _flat_result(ev: dict[str, Any]) -> dict[str, Any]:
    res = ev.get("result") if ev.get("type") == "tool_result" else None
    if isinstance(res, dict) and "output" in res and "exit_code" not in res:
        ev["result"] = (
            {"exit_code": None, "stdout": res["output"]} if res["output"] is not None else None
        )
    return ev


def usage_matches(totals: Mapping[str, Any], row: Mapping[str, Any]) -> list[str]:
    """The usage fields where a trace's turn totals differ from the results row.

    >>> usage_matches({"input_tokens": 5.0}, {"input_tokens": 5, "output_tokens": 1})
    []
    >>> usage_matches({"input_tokens": 4.0}, {"input_tokens": 5})
    ['input_tokens']
    """
    out = []
    for k in USAGE_FIELDS:
        a, b = _num(totals.get(k)), _num(row.get(k))
        if a is None or b is None:
            continue
        if abs(a - b) > (1e-9 if k == "cost_usd" else 0.5):
            out.append(k)
    return out


def iter_tool_calls(conv: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    """Every tool call of a conversation, model-requested or not, in order."""
    for item in conv["items"]:
        if item["kind"] == "turn":
            yield from conv["turns"][item["turn"]]["tool_calls"]
        elif item["kind"] == "tool":
            yield item


__all__ = [
    "EVENTS_NAME",
    "EVENT_TYPES",
    "TRACE_SCHEMA",
    "USAGE_FIELDS",
    "conversation",
    "iter_tool_calls",
    "native_events",
    "read_events",
    "usage_matches",
]
