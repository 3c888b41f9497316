"""The wire formats of the model APIs, one module each, read by the relay and the traces.

- :mod:`~dataspace.llm.wires.chat`: Chat Completions;
- :mod:`~dataspace.llm.wires.responses`: Responses;
- :mod:`~dataspace.llm.wires.messages`: Anthropic Messages.

Each module reads one call: ``usage`` (what the relay meters), ``parse_reply`` (what the
trace page shows of the answer) and ``request_view`` (the prompts and tool outputs a request
carries); :func:`~dataspace.llm.wires.sse.sse_objects` is the one reader of their streams.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any, Literal

from dataspace.llm.wires import chat, messages, responses
from dataspace.llm.wires.base import CallUsage, RequestView
from dataspace.llm.wires.sse import sse_objects

Wire = Literal["chat", "responses", "messages"]
WIRES: tuple[str, ...] = ("chat", "responses", "messages")
_MODULES: dict[str, ModuleType] = {m.NAME: m for m in (chat, responses, messages)}


def _module(wire: str) -> ModuleType:
    try:
        return _MODULES[wire]
    except KeyError:
        raise ValueError(f"wire must be one of {WIRES}, got {wire!r}") from None


def parse_usage(wire: str, raw: bytes | str) -> CallUsage:
    """Tokens, reply model and finish reason of one reply (streamed or not) of ``wire``."""
    return _module(wire).usage(sse_objects(raw))  # type: ignore[no-any-return]


def parse_reply(wire: str, raw: bytes | str) -> dict[str, Any]:
    """Message, reasoning and tool calls of one reply of ``wire``, as ``model_turn`` fields."""
    return _module(wire).parse_reply(sse_objects(raw))  # type: ignore[no-any-return]


def request_view(wire: str, body: Any) -> RequestView:
    """What one request of ``wire`` shows (an empty view when it is not a JSON object)."""
    if not isinstance(body, Mapping):
        return RequestView()
    return _module(wire).request_view(body)  # type: ignore[no-any-return]


__all__ = [
    "WIRES",
    "CallUsage",
    "RequestView",
    "Wire",
    "chat",
    "messages",
    "parse_reply",
    "parse_usage",
    "request_view",
    "responses",
    "sse_objects",
]
