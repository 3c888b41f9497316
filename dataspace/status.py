"""The status of one attempt: the one list, shared by the controller, results and reports.

An attempt ends in an agent outcome (the harness's end state, right or wrong) or has none:
an infrastructure error past its retries, never scheduled (spend limit, fail fast, an
interrupted run), or skipped (an oracle on a task without gold).

>>> AttemptStatus("submitted").is_agent_outcome, AttemptStatus.NOT_SCHEDULED.is_unfinished
(True, True)
>>> AttemptStatus.SKIPPED == "skipped"
True
"""

from __future__ import annotations

from enum import StrEnum


class AttemptStatus(StrEnum):
    """Where an attempt ended (the ``status`` column of the results)."""

    SUBMITTED = "submitted"
    WALL_TIME_EXHAUSTED = "wall_time_exhausted"
    MODEL_TURNS_EXHAUSTED = "model_turns_exhausted"
    TOOL_ACTIONS_EXHAUSTED = "tool_actions_exhausted"
    STOPPED = "stopped"
    RUNTIME_ERROR = "runtime_error"
    # the native CLIs' end states, as the official runner names them
    NO_PREDICTION = "no_prediction"
    INVALID_PREDICTION = "invalid_prediction"
    MODEL_OUTPUT_EXHAUSTED = "model_output_exhausted"
    CONTEXT_WINDOW_EXHAUSTED = "context_window_exhausted"
    INFRASTRUCTURE_ERROR = "infrastructure_error"
    NOT_SCHEDULED = "not_scheduled"
    SKIPPED = "skipped"

    @property
    def is_unfinished(self) -> bool:
        """No result yet: a rerun of the run tries it again."""
        return self in (AttemptStatus.INFRASTRUCTURE_ERROR, AttemptStatus.NOT_SCHEDULED)

    @property
    def is_agent_outcome(self) -> bool:
        """The agent ran to an end state (the statuses a harness reports)."""
        return not self.is_unfinished and self is not AttemptStatus.SKIPPED


ENDPOINT_UNREACHABLE = "endpoint_unreachable"
"""The mark (a row's flag, an infrastructure record's code, ``--retry``'s value) of an attempt
ended by a model endpoint that could not be reached past the profile's retries."""

AGENT_END_STATES: tuple[str, ...] = tuple(s.value for s in AttemptStatus if s.is_agent_outcome)
UNFINISHED_STATUSES: tuple[str, ...] = tuple(s.value for s in AttemptStatus if s.is_unfinished)

__all__ = ["AGENT_END_STATES", "ENDPOINT_UNREACHABLE", "UNFINISHED_STATUSES", "AttemptStatus"]
