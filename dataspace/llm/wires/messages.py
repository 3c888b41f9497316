"""Anthropic Messages (``POST .../v1/messages``, Claude Code): usage, reply and request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.llm.wires import base
from dataspace.llm.wires.base import CallUsage, RequestView

NAME = "messages"


def usage(events: Sequence[Mapping[str, Any]]) -> CallUsage:
    """Tokens (cache reads and writes counted as input), reply model and stop reason."""
    inp = cached = out = 0
    model: str | None = None
    finish: str | None = None
    for ev in events:
        msg = ev.get("message") if ev.get("type") == "message_start" else ev
        if not isinstance(msg, Mapping):
            continue
        if msg.get("model"):
            model = str(msg["model"])
        delta = ev.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            finish = str(delta["stop_reason"])
        if msg.get("stop_reason"):
            finish = str(msg["stop_reason"])
        u = msg.get("usage") if "usage" in msg else ev.get("usage")
        if isinstance(u, dict):
            if "input_tokens" in u:
                cached = base.count(u.get("cache_read_input_tokens"))
                inp = base.count(u.get("input_tokens")) + cached
                inp += base.count(u.get("cache_creation_input_tokens"))
            if "output_tokens" in u:
                out = base.count(u.get("output_tokens"))
    return base.call_usage(inp, cached, out, 0, model, finish)


def parse_reply(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The text, thinking and tool uses of one reply (content blocks and their deltas)."""
    msg: Mapping[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    stop = None
    if events and events[0].get("type") == "message":  # a reply that was not streamed
        msg = events[0]
        blocks = {
            i: dict(b) for i, b in enumerate(msg.get("content") or []) if isinstance(b, Mapping)
        }
        stop = msg.get("stop_reason")
    for d in events:
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
    return base.reply(content, reasoning, calls, stop, msg.get("id"), msg.get("model"))


def tool_results(content: Any) -> dict[str, dict[str, Any]]:
    """The ``tool_result`` blocks of a user message's content, by ``tool_use_id``."""
    out = {}
    for b in content if isinstance(content, list) else []:
        if isinstance(b, Mapping) and b.get("type") == "tool_result":
            out[str(b.get("tool_use_id"))] = {
                "text": base.blocks_text(b.get("content")),
                "error": bool(b.get("is_error")),
            }
    return out


def request_view(body: Mapping[str, Any]) -> RequestView:
    """``system``, the first user message with text and the ``tool_result`` blocks."""
    user = None
    outputs: dict[str, Any] = {}
    for m in body.get("messages") or []:
        if not isinstance(m, Mapping) or m.get("role") != "user":
            continue
        content = m.get("content")
        outputs.update(tool_results(content))
        text = base.blocks_text(content)
        if text and user is None:
            user = text
    return RequestView(
        system=base.blocks_text(body.get("system")) or None, user=user, outputs=outputs
    )


__all__ = ["NAME", "parse_reply", "request_view", "tool_results", "usage"]
