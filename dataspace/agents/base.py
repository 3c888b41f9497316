"""The agent contract: a harness acts on one task inside one sandbox and ends in a state.

End states are those of the paper's runner: ``submitted``, ``wall_time_exhausted``,
``model_turns_exhausted``, ``tool_actions_exhausted``, ``stopped``, ``runtime_error``; the
native CLIs (Codex, Claude Code, Grok Build) end as the official native runner has it,
which adds ``no_prediction``, ``invalid_prediction``, ``model_output_exhausted`` and
``context_window_exhausted``. Every one but ``submitted`` scores as incorrect; none of
them is an infrastructure failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from dataspace.limits import Limits
from dataspace.release import TaskInput
from dataspace.sandbox.base import Sandbox
from dataspace.traces import EventLog, Usage

EndState = Literal[
    "submitted",
    "wall_time_exhausted",
    "model_turns_exhausted",
    "tool_actions_exhausted",
    "stopped",
    "runtime_error",
    "no_prediction",
    "invalid_prediction",
    "model_output_exhausted",
    "context_window_exhausted",
]
END_STATES: tuple[str, ...] = (
    "submitted",
    "wall_time_exhausted",
    "model_turns_exhausted",
    "tool_actions_exhausted",
    "stopped",
    "runtime_error",
    "no_prediction",
    "invalid_prediction",
    "model_output_exhausted",
    "context_window_exhausted",
)


AgentLimits = Limits
"""The agent's budgets are the attempt's ``Limits`` (``dataspace.limits``): one record."""


@dataclass(frozen=True, kw_only=True)
class PredictionSnapshot:
    """The answer file as it was when the agent submitted it (taken by the controller).

    What is stored and scored is this snapshot, never the file as it is later: a process the
    agent left running cannot change an accepted answer.

    Attributes:
        path: the sandbox path the bytes were read from (the scored file).
        data: its bytes, or None when there was no file to score.
        sha256: hex digest of the file (None when there is no file).
        problem: why there is nothing to score, when ``data`` is None.
        size: the file's size when it is over the evaluator's limit and so was not read
            (``data`` is None; the evaluator judges the file collected from the sandbox
            when its digest is still ``sha256``).
    """

    path: str
    data: bytes | None
    sha256: str | None = None
    problem: str | None = None
    size: int | None = None


@dataclass(frozen=True, kw_only=True)
class SandboxNeeds:
    """What a harness needs its attempt's sandbox to have at creation (``sandbox_needs()``).

    ``relay``: the wire relay's socket bound in (the native CLIs); ``runtime_binds``: host
    folders shown read-only inside (a harness's own install).
    """

    relay: bool = True
    runtime_binds: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True)
class AgentResult:
    """How an attempt's agent ended.

    Attributes:
        end_state: one of ``END_STATES``.
        submitted_path: the path (inside the sandbox) the agent submitted, if any.
        model_turns: model calls that counted as turns.
        tool_actions: tool calls executed.
        usage: tokens and cost.
        error: a one-line description for ``runtime_error`` and ``stopped``.
        working_seconds: wall time minus time spent waiting on model retries.
        prediction: the scored file's snapshot taken at submit time, for harnesses that
            take one (otherwise the collected file at ``submitted_path`` is scored).
        endpoint_unreachable: the end was decided by a model endpoint that could not be
            reached past the profile's retries (the row is marked so; see ``ResultRow``).
    """

    end_state: str
    submitted_path: str | None = None
    model_turns: int = 0
    tool_actions: int = 0
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    working_seconds: float = 0.0
    prediction: PredictionSnapshot | None = None
    endpoint_unreachable: bool = False


UsageSink = Callable[[Usage], None]
"""Called with an attempt's running usage after each model call completes, so that what a
try spent is persisted before it ends (an attempt killed mid-way is still counted)."""


@dataclass(frozen=True, kw_only=True)
class AgentContext:
    """What a harness gets for one attempt.

    Attributes:
        task: the question and task id (never gold).
        sandbox: the attempt's live sandbox.
        limits: the attempt's limits (the agent reads its budgets: model turns, tool
            actions, wall seconds, command timeout).
        events: the attempt's trace.
        deadline: ``time.monotonic()`` value at which the wall budget ends.
        oracle: host-side access to the reference answer; given only to agents whose
            ``needs_oracle`` is true (the ``gold`` agent), None for every other agent.
        settings: agent settings from the run spec (model, endpoint, prompts ...).
        relay_dir: the host folder bound into the sandbox at ``RELAY_DIR`` for a relay's
            Unix socket, when the agent asked for one (``sandbox_needs``); else None.
        usage_sink: where the harness's metered client or relay reports its running usage
            after each model call (``UsageSink``); None when nobody listens.
    """

    task: TaskInput
    sandbox: Sandbox
    limits: Limits
    events: EventLog
    deadline: float
    oracle: Callable[[], bytes] | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    relay_dir: Path | None = None
    usage_sink: UsageSink | None = None

    def remaining(self) -> float:
        """Seconds left on the wall budget."""
        return self.deadline - time.monotonic()


RUN_SETTINGS = frozenset({"model", "run_id", "protocol"})
"""Keys the attempt adds to every agent's ``settings``; an agent that has no use for one
ignores it (the protocol profile, for one, shapes DataSpace-Agent's loop only)."""


def unknown_settings(settings: Mapping[str, Any], allowed: Iterable[str]) -> list[str]:
    """The keys of ``settings`` an agent does not know, sorted (run settings are known).

    >>> unknown_settings({"model": "m", "run_id": "r", "retry": {}, "tmep": 0}, {"retry"})
    ['tmep']
    """
    return sorted(set(settings) - set(allowed) - RUN_SETTINGS)


@runtime_checkable
class Agent(Protocol):
    """A harness: acts through the sandbox and returns how it ended.

    It never raises for the agent's own failures (those are end states); it raises
    ``InfrastructureError`` for faults outside the agent (endpoint unreachable past retries).
    Every harness subclasses it, so the layers above read each capability below without
    asking whether a harness has it; a harness overrides the ones it differs in.

    Attributes:
        name: the harness's registered name.
        needs_oracle: the harness submits the release's gold answer (``AgentContext.oracle``).
        wire: the wire API it speaks to its model endpoint (``chat``, ``responses`` or
            ``messages``), which preflight probes.
    """

    name: str
    needs_oracle: bool = False
    wire: ClassVar[str] = "chat"

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any], *, has_model: bool) -> None:
        """Refuse a run spec's settings this harness cannot run, before any attempt.

        The default accepts any settings.

        Raises:
            ConfigError: a setting (or a missing model) the harness refuses.
        """
        return None

    def sandbox_needs(self) -> SandboxNeeds | None:
        """What the attempt's sandbox must have at creation; None (the default): nothing."""
        return None

    def run(self, ctx: AgentContext) -> AgentResult:
        """Run one attempt to an end state."""
        ...


__all__ = [
    "END_STATES",
    "RUN_SETTINGS",
    "Agent",
    "AgentContext",
    "AgentLimits",
    "AgentResult",
    "EndState",
    "Limits",
    "SandboxNeeds",
    "UsageSink",
    "unknown_settings",
]
