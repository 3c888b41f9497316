r"""Reading a trace: the events of an attempt folded into what a reader follows.

:func:`conversation` folds a log (:func:`dataspace.traces.read_events`) into what the trace
page shows: the question, the prompts, and one entry per model turn with its message, its
tool calls (arguments and output), its usage, latency and the retries before it. A native
CLI's log is first read into the schema's own events (:mod:`dataspace.report.native_trace`).

>>> import json
>>> from dataspace.traces import TRACE_SCHEMA, read_events
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

from dataspace.report.native_trace import native_events
from dataspace.traces.usage import USAGE_FIELDS
from dataspace.traces.usage import as_number as _num

logger = logging.getLogger(__name__)

MAX_TEXT = 200_000  # characters of one text kept for the page (the rest is marked cut)


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


def iter_tool_calls(conv: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    """Every tool call of a conversation, model-requested or not, in order."""
    for item in conv["items"]:
        if item["kind"] == "turn":
            yield from conv["turns"][item["turn"]]["tool_calls"]
        elif item["kind"] == "tool":
            yield item


__all__ = ["MAX_TEXT", "conversation", "iter_tool_calls"]
