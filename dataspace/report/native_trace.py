"""Reading a native CLI's log into the trace schema's own events.

Native command-line harnesses (Codex, Claude Code, Grok Build) run their own loop inside
the sandbox; their log holds what the relay saw and what the CLI printed, and
:func:`native_events` (called by :func:`dataspace.report.conversation.conversation`) reads
it in the events the other harnesses write (:mod:`dataspace.traces.events`):

- a relayed ``model_call`` (:class:`~dataspace.traces.RelayedCall`) with status 200
  becomes ``model_call`` (its usage; ``seconds`` as ``latency_seconds``) and ``model_turn``
  (the message, reasoning and tool calls its wire's module,
  :mod:`dataspace.llm.wires`, reads from ``raw``); any other status is a ``model_retry``
  (the harness retried it; it used no tokens);
- ``harness_output``: tool calls get their outputs from it where it names the call
  (Claude Code's ``tool_result`` blocks), else from the next request
  (``function_call_output``, ``tool_result``, ``role: tool`` messages, which hold what the
  model saw); Codex's ``command_execution`` items add the exit code of each shell call, in
  order. Its errors (``turn.failed``, ``error``, an ``is_error`` result) become ``error``
  events;
- ``model_refused`` becomes an ``error``.

The prompts come from the first request (``instructions`` or ``system``, and the task's
user message), so the page shows what the CLI sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.llm.wires import WIRES, parse_reply, request_view
from dataspace.llm.wires.messages import tool_results
from dataspace.traces import USAGE_FIELDS, read_events

NATIVE_SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command", "local_shell", "Bash"})


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
            by_id.update(tool_results(ev["message"].get("content")))
        elif kind == "result" and ev.get("is_error"):
            errors.append(str(ev.get("result") or ev.get("subtype") or "the harness failed"))
    return by_id, commands, errors, warnings


def native_events(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A native CLI's log in the schema's own events (see the module docstring).

    Logs without relay calls (``model_call`` events carrying ``wire``) come back as they are.
    """
    calls = [e for e in events if e.get("type") == "model_call" and e.get("wire") in WIRES]
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
        views.append(request_view(str(c["wire"]), body))
    outputs: dict[str, Any] = {}
    for v in views:
        outputs.update(v.outputs)
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
                    "system_prompt": ev.get("system_prompt") or first.system,
                    "user_prompt": ev.get("user_prompt") or first.user,
                }
            )
        elif kind == "model_call" and ev.get("wire") in WIRES:
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
            reply = parse_reply(str(ev["wire"]), str(ev.get("raw") or ""))
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


__all__ = ["NATIVE_SHELL_TOOLS", "native_events"]
