"""The outcome of one check (preflight, doctor): a record every layer can return.

Checks are made by the run layer (``dataspace.runs.preflight``) and by sandbox backends
(``SandboxBackend.preflight``), so the record lives below both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from dataspace.errors import DataSpaceError


@dataclass(frozen=True, kw_only=True)
class Check:
    """The outcome of one preflight check.

    Attributes:
        key: the spec key (``agents[0].model.key_env``) or machine part it is about.
        ok: True when it passed.
        message: what was found; for a failure, what to do about it.
        warning: a problem that does not stop the run.
        seconds: how long the check took.
        cost_usd: what a metered model call cost (0 for other checks).
    """

    key: str
    ok: bool
    message: str
    warning: bool = False
    seconds: float = 0.0
    cost_usd: float = 0.0

    def line(self) -> str:
        """One line for the screen.

        >>> Check(key="store", ok=True, message="writable").line()
        'ok   store: writable'
        """
        mark = "ok  " if self.ok and not self.warning else ("warn" if self.ok else "FAIL")
        return f"{mark} {self.key}: {self.message}"


def one_line(message: str) -> str:
    """A message on one line (whitespace runs folded).

    >>> one_line("a   b")
    'a b'
    """
    return " ".join(message.split())


def timed(key: str, fn: Callable[[], str | tuple[str, bool]]) -> Check:
    """Run ``fn`` as the check ``key``: its text (and warning flag), or the error it raised.

    ``fn`` returns a message, or ``(message, warning)``; a ``DataSpaceError`` it raises is
    the failed check's message (on one line).
    """
    t0 = time.monotonic()
    try:
        out = fn()
    except DataSpaceError as exc:
        return Check(key=key, ok=False, message=one_line(str(exc)), seconds=time.monotonic() - t0)
    message, warning = out if isinstance(out, tuple) else (out, False)
    return Check(key=key, ok=True, message=message, warning=warning, seconds=time.monotonic() - t0)


__all__ = ["Check", "one_line", "timed"]
