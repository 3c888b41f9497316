"""What every wire format's module returns, and the helpers they share."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dataspace.llm.usage import TokenCounts


@dataclass(frozen=True, kw_only=True)
class CallUsage:
    """What one reply used, as the endpoint reported it (tokens, reply model, finish)."""

    tokens: TokenCounts
    model: str | None
    finish: str | None


@dataclass(frozen=True, kw_only=True)
class RequestView:
    """What a request shows of the conversation.

    The system prompt, the task message, and the tool outputs it carries by call id (a
    text, or ``{"text", "error"}``).
    """

    system: str | None = None
    user: str | None = None
    outputs: dict[str, Any] = field(default_factory=dict)


def count(v: object) -> int:
    """A token count as the endpoint wrote it (anything but a positive number is 0).

    >>> count(12), count(-1), count(True), count(None)
    (12, 0, 0, 0)
    """
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and v > 0 else 0


def detailed_counts(u: Mapping[str, Any], inp: str, out: str) -> tuple[int, int, int, int]:
    """Input, cached, output and reasoning tokens of an OpenAI-style usage record.

    ``inp`` and ``out`` name its totals; ``<inp>_details`` and ``<out>_details`` the rest.

    >>> detailed_counts({"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4},
    ...                  "output_tokens": 3}, "input_tokens", "output_tokens")
    (9, 4, 3, 0)
    """
    idt, odt = u.get(f"{inp}_details"), u.get(f"{out}_details")
    return (
        count(u.get(inp)),
        count(idt.get("cached_tokens")) if isinstance(idt, Mapping) else 0,
        count(u.get(out)),
        count(odt.get("reasoning_tokens")) if isinstance(odt, Mapping) else 0,
    )


def call_usage(
    inp: int, cached: int, out: int, reasoning: int, model: str | None, finish: str | None
) -> CallUsage:
    """A ``CallUsage`` with cached tokens capped by input and reasoning by output."""
    return CallUsage(
        tokens=TokenCounts(
            input_tokens=inp,
            cached_input_tokens=min(cached, inp),
            output_tokens=out,
            reasoning_tokens=min(reasoning, out),
        ),
        model=model,
        finish=finish,
    )


def blocks_text(
    content: Any, kinds: tuple[str, ...] = ("text", "input_text", "output_text")
) -> str:
    r"""The text of a message's content (a string or a list of typed blocks).

    >>> blocks_text([{"type": "text", "text": "a"}, {"type": "image"}, "b"])
    'a\nb'
    """
    if isinstance(content, str):
        return content
    parts = []
    for b in content if isinstance(content, list) else []:
        if isinstance(b, Mapping) and b.get("type") in kinds and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif isinstance(b, str):
            parts.append(b)
    return "\n".join(parts)


def as_text(v: Any) -> str | None:
    """A tool output as text: itself when a string, its blocks' text, else its JSON."""
    if v is None or isinstance(v, str):
        return v
    return blocks_text(v) or json.dumps(v, ensure_ascii=False, indent=1, default=str)


def reply(
    content: list[str],
    reasoning: list[str],
    calls: list[dict[str, Any]],
    finish: Any,
    response_id: Any,
    model: Any,
    sep: str = "\n",
) -> dict[str, Any]:
    """A parsed reply in the fields of a ``model_turn`` event."""
    return {
        "content": sep.join(c for c in content if c) or None,
        "reasoning": sep.join(r for r in reasoning if r) or None,
        "tool_calls": calls,
        "finish_reason": finish,
        "response_id": response_id,
        "resolved_model": model,
    }


__all__ = [
    "CallUsage",
    "RequestView",
    "as_text",
    "blocks_text",
    "call_usage",
    "count",
    "detailed_counts",
    "reply",
]
