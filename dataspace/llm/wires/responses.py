"""Responses (``POST .../responses``, Codex): usage, reply and request of one call."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.llm.wires import base
from dataspace.llm.wires.base import CallUsage, RequestView

NAME = "responses"
_FINAL = ("response.completed", "response.incomplete", "response.failed")
_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def usage(events: Sequence[Mapping[str, Any]]) -> CallUsage:
    """Tokens, reply model and finish (``incomplete:<reason>`` when cut) of one reply."""
    inp = cached = out = reasoning = 0
    model: str | None = None
    finish: str | None = None
    for ev in events:
        resp = ev.get("response") if isinstance(ev.get("response"), dict) else ev
        if not isinstance(resp, Mapping):
            continue
        model = resp.get("model") or model
        if ev.get("type", "").endswith((".completed", ".incomplete", ".failed")) or (
            "usage" in resp and "type" not in ev
        ):
            finish = str(resp.get("status") or finish)
            details = resp.get("incomplete_details")
            if isinstance(details, dict) and details.get("reason"):
                finish = f"incomplete:{details['reason']}"
        u = resp.get("usage")
        if isinstance(u, dict):
            inp, cached, out, reasoning = base.detailed_counts(u, "input_tokens", "output_tokens")
    return base.call_usage(inp, cached, out, reasoning, model, finish)


def parse_reply(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The message, reasoning (summary and text) and tool calls of one reply."""
    items: list[Any] = []
    final = next(
        (
            d["response"]
            for d in reversed(events)
            if isinstance(d.get("response"), Mapping) and d.get("type") in _FINAL
        ),
        None,
    )
    if final is None and events and "output" in events[0]:  # a reply that was not streamed
        final = events[0]
    if final is not None and isinstance(final.get("output"), list) and final["output"]:
        items = final["output"]
    else:
        items = [d["item"] for d in events if d.get("type") == "response.output_item.done"]
    content, reasoning, calls = [], [], []
    for it in items:
        if not isinstance(it, Mapping):
            continue
        kind = it.get("type")
        if kind == "message":
            content.append(base.blocks_text(it.get("content")))
        elif kind == "reasoning":
            reasoning.append(base.blocks_text(it.get("summary"), ("summary_text", "text")))
            reasoning.append(base.blocks_text(it.get("content"), ("reasoning_text", "text")))
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
    return base.reply(
        content,
        reasoning,
        calls,
        (final or {}).get("status") if not status else json.dumps(status),
        (final or {}).get("id"),
        (final or {}).get("model"),
    )


def request_view(body: Mapping[str, Any]) -> RequestView:
    """``instructions``, the last user message and the ``*_call_output`` items.

    The task's message comes after the context, so the last user message is the task.
    """
    instructions = body.get("instructions")
    users: list[str] = []
    outputs: dict[str, Any] = {}
    for it in body.get("input") or []:
        if not isinstance(it, Mapping):
            continue
        if it.get("type") in _OUTPUT_ITEMS:
            outputs[str(it.get("call_id"))] = base.as_text(it.get("output"))
        elif it.get("role") == "user":
            users.append(base.blocks_text(it.get("content")))
    return RequestView(
        system=instructions if isinstance(instructions, str) else None,
        user=users[-1] if users else None,
        outputs=outputs,
    )


__all__ = ["NAME", "parse_reply", "request_view", "usage"]
