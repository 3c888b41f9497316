"""The one reader of server-sent events: the JSON objects of a streamed (or plain) reply."""

from __future__ import annotations

import json
from typing import Any


def sse_objects(raw: bytes | str) -> list[dict[str, Any]]:
    r"""The JSON objects of a server-sent-event stream (``data:`` lines), or the one JSON reply.

    Lines that are not JSON objects (``data: [DONE]``, ``event:`` names, comments) are
    skipped.

    >>> sse_objects(b'event: x\ndata: {"a": 1}\n\ndata: [DONE]\n')
    [{'a': 1}]
    >>> sse_objects('{"id": "r"}')
    [{'id': 'r'}]
    """
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    whole = text.strip()
    if whole.startswith("{"):
        try:
            one = json.loads(whole)
        except ValueError:
            one = None
        if isinstance(one, dict):
            return [one]
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("data:"):
            continue
        try:
            v = json.loads(line[5:].strip())
        except ValueError:
            continue
        if isinstance(v, dict):
            out.append(v)
    return out


__all__ = ["sse_objects"]
