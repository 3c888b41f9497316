"""Chat Completions (``POST .../chat/completions``): usage, reply and request of one call."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dataspace.llm.wires import base
from dataspace.llm.wires.base import CallUsage, RequestView

NAME = "chat"


def usage(events: Sequence[Mapping[str, Any]]) -> CallUsage:
    """Tokens, reply model and finish reason of one reply (its chunks, or the one body)."""
    inp = cached = out = reasoning = 0
    model: str | None = None
    finish: str | None = None
    for ev in events:
        model = ev.get("model") or model
        for c in ev.get("choices") or []:
            if isinstance(c, dict) and c.get("finish_reason"):
                finish = str(c["finish_reason"])
        u = ev.get("usage")
        if isinstance(u, dict):
            inp, cached, out, reasoning = base.detailed_counts(
                u, "prompt_tokens", "completion_tokens"
            )
    return base.call_usage(inp, cached, out, reasoning, model, finish)


def parse_reply(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The message, reasoning and tool calls of one reply (deltas joined)."""
    content, reasoning = [], []
    calls: dict[int, dict[str, Any]] = {}
    finish = rid = model = None
    for d in events:
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
    return base.reply(
        content, reasoning, [c for _, c in sorted(calls.items())], finish, rid, model, sep=""
    )


def request_view(body: Mapping[str, Any]) -> RequestView:
    """The system message, the first user message and the ``role: tool`` outputs."""
    system = user = None
    outputs: dict[str, Any] = {}
    for m in body.get("messages") or []:
        if not isinstance(m, Mapping):
            continue
        if m.get("role") == "system" and system is None:
            system = base.blocks_text(m.get("content"))
        elif m.get("role") == "user" and user is None:
            user = base.blocks_text(m.get("content"))
        elif m.get("role") == "tool":
            outputs[str(m.get("tool_call_id"))] = base.blocks_text(m.get("content"))
    return RequestView(system=system, user=user, outputs=outputs)


def normalize_finish_line(line: bytes) -> bytes:
    r"""Map a ``finish_reason: "other"`` to ``"stop"`` in one SSE line.

    >>> normalize_finish_line(b'data: {"choices": [{"finish_reason": "other"}]}\n')
    b'data: {"choices":[{"finish_reason":"stop"}]}\n'
    >>> normalize_finish_line(b"data: [DONE]\n")
    b'data: [DONE]\n'
    """
    stripped = line.rstrip(b"\r\n")
    suffix = line[len(stripped) :]
    body = stripped[5:].strip() if stripped.startswith(b"data:") else stripped.strip()
    if not body.startswith(b"{"):
        return line
    try:
        value = json.loads(body)
    except ValueError:
        return line
    changed = False
    for choice in value.get("choices") or [] if isinstance(value, dict) else []:
        if isinstance(choice, dict) and choice.get("finish_reason") == "other":
            choice["finish_reason"] = "stop"
            changed = True
    if not changed:
        return line
    out = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    return (b"data: " + out if stripped.startswith(b"data:") else out) + suffix


__all__ = ["NAME", "normalize_finish_line", "parse_reply", "request_view", "usage"]
