"""Reading a trace's lines back into events (plain mappings, as a reader of any age sees them)."""

from __future__ import annotations

import json
from typing import Any


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


__all__ = ["read_events"]
