"""The limits of one attempt: its agent's budgets and its sandbox's resources, one record.

Every default is the official baseline's (``baseline/configs/vercel.yaml`` and the paper):
60 model turns, 50 tool actions, 1,800 s of wall clock and 180 s per command for the
agent; 4 CPUs, 16 GiB of memory (Docker's ``16g``), 256 pids and a 2 GiB ``/tmp`` for its
sandbox. The output folder's 1 GiB is ours (the official runner bind-mounts a host folder
with no bound; agent output is untrusted input here). The run spec reads ``limits:`` and
the resource keys of ``sandbox:`` into this record, agents get it in their context and
sandbox backends enforce it, so each default is written here and nowhere else.

>>> Limits().cpus, Limits().memory_bytes // 1024**3, Limits().wall_seconds
(4.0, 16, 1800.0)
>>> Limits(wall_seconds=100).for_sandbox().wall_seconds
260.0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

AGENT_FIELDS = ("model_turns", "tool_actions", "wall_seconds", "command_timeout")
"""The agent's budgets (the spec's ``limits:`` keys)."""
RESOURCE_FIELDS = ("cpus", "memory_bytes", "pids", "tmp_bytes", "output_bytes")
"""The sandbox's resources (read from the spec's ``sandbox:`` mapping)."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Per-attempt limits (the official baseline's defaults).

    Attributes:
        model_turns: model calls that count as turns.
        tool_actions: tool calls executed.
        wall_seconds: the agent's wall-clock budget. A sandbox reads it as its own
            deadline (after it every command is refused or killed); behind an agent the
            sandbox gets :meth:`for_sandbox`, whose deadline outlives the budget.
        command_timeout: the cap of each command.
        cpus: CPUs of the sandbox (a CFS quota; requests equal limits on Kubernetes).
        memory_bytes: memory of the sandbox.
        pids: processes and threads of the sandbox.
        tmp_bytes: size of the sandbox's ``/tmp``.
        output_bytes: size of the sandbox's writable output folder.
    """

    model_turns: int = 60
    tool_actions: int = 50
    wall_seconds: float = 1800.0
    command_timeout: float = 180.0
    cpus: float = 4.0
    memory_bytes: int = 16 * 1024**3
    pids: int = 256
    tmp_bytes: int = 2 * 1024**3
    output_bytes: int = 1024**3

    def for_sandbox(self) -> Limits:
        """The record a sandbox gets behind an agent: its deadline is a safety net.

        The agent's clock excludes time lost to model retries, so the sandbox must outlive
        the budget by a margin (twice it, plus a minute); it still ends a harness that
        ignores its budget.
        """
        return dataclasses.replace(self, wall_seconds=float(2 * self.wall_seconds + 60))

    def agent_budgets(self) -> dict[str, Any]:
        """The agent's budgets as a mapping (the spec's ``limits:`` keys)."""
        return {name: getattr(self, name) for name in AGENT_FIELDS}

    def resources(self) -> dict[str, Any]:
        """The sandbox's resources as a mapping (``cpus``, ``memory_bytes`` ...)."""
        return {name: getattr(self, name) for name in RESOURCE_FIELDS}


def format_size(n: int, *, docker: bool = False) -> str:
    """A size in the largest binary unit that keeps it readable.

    >>> format_size(16 * 1024**3), format_size(256 * 1024**2), format_size(1024**5)
    ('16 GiB', '256 MiB', '1 PiB')
    >>> format_size(1536 * 1024**2), format_size(16 * 1024**3, docker=True)
    ('1.5 GiB', '16g')
    """
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    k = 0
    x = float(n)
    while x >= 1024 and k < len(units) - 1:
        x /= 1024
        k += 1
    if docker:
        return f"{int(x)}{'bkmgtp'[k]}" if x == int(x) else f"{n}b"
    return f"{x:.4g} {units[k]}"


DEFAULT_LIMITS = Limits()
"""The defaults, for parsers that fill in a key a spec left out."""

__all__ = ["AGENT_FIELDS", "DEFAULT_LIMITS", "RESOURCE_FIELDS", "Limits", "format_size"]
