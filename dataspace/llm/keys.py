"""Model keys held in memory for the attempt that needs them, never in a file or a log.

The controller reads each agent's key from its own environment (the variable named by
``ModelSpec.key_env``). Attempt workers on Ray get it at run time from the controller's key
holder (``dataspace.runs.keys``) and place it here, in this process's memory, for the
duration of the attempt; the metered client looks here first, then in the environment.

>>> with provided_keys({"DATASPACE_DOCTEST_KEY": "sk-demo"}):
...     lookup_key("DATASPACE_DOCTEST_KEY")
'sk-demo'
>>> lookup_key("DATASPACE_DOCTEST_KEY") is None
True
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping

_lock = threading.Lock()
_provided: dict[str, list[str]] = {}


@contextlib.contextmanager
def provided_keys(keys: Mapping[str, str]) -> Iterator[None]:
    """Make ``keys`` (variable name -> key) visible to :func:`lookup_key` within the block."""
    with _lock:
        for name, value in keys.items():
            _provided.setdefault(name, []).append(value)
    try:
        yield
    finally:
        with _lock:
            for name in keys:
                stack = _provided.get(name)
                if stack:
                    stack.pop()
                    if not stack:
                        del _provided[name]


def lookup_key(name: str) -> str | None:
    """The key of variable ``name``: one provided for this attempt, else the environment's."""
    with _lock:
        stack = _provided.get(name)
        if stack:
            return stack[-1]
    return os.environ.get(name) or None


__all__ = ["lookup_key", "provided_keys"]
