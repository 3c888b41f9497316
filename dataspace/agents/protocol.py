r"""Protocol profiles of DataSpace-Agent: the official baseline's run semantics, or ours.

A run spec's ``protocol`` names one profile for every agent of the run; it is part of the
run's fingerprint, of every result row and of every report heading.

``official`` (the default) reproduces the official baseline's DataSpace-Agent (its
``dataspace-agent`` CLI with ``configs/vercel.yaml``): the same request bodies, byte for
byte, and the same run semantics. ``extended`` keeps this project's improvements, each a
named rule below. ``ProtocolProfile`` holds every rule that differs between the two, so a
test can switch one rule off (``dataclasses.replace(OFFICIAL, login_shell=False)``) and see
that the official fixtures no longer match.

Rules (``True`` in the official profile unless said otherwise; ``extended`` is the other
way round for every rule but ``strip_question``):

- ``remaining_time_notes`` (official: off): tell the agent its remaining wall time in the
  first message, in each tool observation (``time_remaining_seconds``) and each reminder.
- ``retries_charged_to_wall_clock``: time lost to failed model requests and their backoff
  counts against the wall budget (extended: it is added back to the deadline).
- ``sdk_default_retries``: a failed model request is retried as the OpenAI SDK does by
  default (2 retries, its backoff), then the attempt ends ``runtime_error`` (extended: up to
  ``RetryPolicy.max_retries`` retries, then an infrastructure fault the controller retries).
- ``request_timeout_is_remaining_wall_time``: each request may take the whole remaining
  wall time (at least 1 s) and a timeout is retried like any failure (extended: 600 s per
  request, capped by the time left, whose end is ``wall_time_exhausted``).
- ``login_shell``: commands run under ``bash -lc`` (extended: ``bash -c``).
- ``normalize_carriage_returns``: command output is read with universal newlines, so
  ``\r\n`` and a lone ``\r`` become ``\n`` (extended: kept as produced).
- ``timeout_exit_code_137``: a command killed at its timeout reports exit code 137, as
  ``timeout --signal=KILL`` does (extended: ``null``).
- ``timed_out_from_exit_code``: a command that exits 124 or 137 by itself is reported
  ``timed_out`` (extended: only a command that was killed).
- ``cap_commands_by_wall_clock`` (official: off): each command's timeout is capped by the
  remaining wall time and the wall clock is checked before each tool call of a reply.
- ``score_prediction_csv``: the scored file is ``/output/prediction.csv`` whatever path was
  submitted (extended: the submitted file).
- ``strip_question``: the question is stripped of surrounding whitespace (off: sent as the
  task file has it; both profiles strip).
- ``check_evaluator_limits`` (official: off): ``submit_answer`` refuses a CSV the evaluator
  would reject (over 20 MiB, NUL bytes, more than 64 columns or 100,000 rows, cells over
  2 MiB). The official tool accepts any rectangular CSV and ends the run; a file over
  20 MiB is then checked inside the sandbox and the evaluator rejects it when it is scored.
- ``resource_markers`` (official: off): a command killed by the memory or process limit
  gets a marker line in its stderr.
- ``absolute_links_refused``: a path that passes through a symbolic link with an absolute
  target (``prediction.csv -> /output/answers/final.csv``) is refused as leaving the
  permitted roots, as the official tools resolve links on the host, where such a target
  names a host path (extended: resolved inside the sandbox like a relative link, and
  accepted when it stays under the roots).

Both profiles share what the official baseline fixes and nothing improves on: the system
prompt and tool schemas, ``max_tokens`` 32,768, ``tool_choice: auto``, truncation to 20,000
characters per stream (two thirds head, one third tail), images re-encoded as JPEG quality
90 with a 1,600-pixel long edge, and the reminder text. Safety bounds apply in both
(``docs/agents.md``): an image is measured before it is decoded and decoded in a child
process under a memory limit (a memory group of its own where the host has cgroups), the
submitted file's bytes are taken when it is submitted, and paths (a linked
``prediction.csv`` too) are resolved inside the sandbox and never followed out of
``/output``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from dataspace.errors import ConfigError, InfrastructureError
from dataspace.status import ENDPOINT_UNREACHABLE

DEFAULT_PROTOCOL = "official"


@dataclass(frozen=True, kw_only=True)
class ProtocolProfile:
    """The run-semantics rules of one protocol profile (see the module docstring)."""

    name: str
    remaining_time_notes: bool
    retries_charged_to_wall_clock: bool
    sdk_default_retries: bool
    request_timeout_is_remaining_wall_time: bool
    login_shell: bool
    normalize_carriage_returns: bool
    timeout_exit_code_137: bool
    timed_out_from_exit_code: bool
    cap_commands_by_wall_clock: bool
    score_prediction_csv: bool
    strip_question: bool
    check_evaluator_limits: bool
    resource_markers: bool
    absolute_links_refused: bool

    @classmethod
    def rules(cls) -> tuple[str, ...]:
        """The names of the switches (every field but ``name``).

        >>> "login_shell" in ProtocolProfile.rules()
        True
        """
        return tuple(f.name for f in fields(cls) if f.name != "name")


OFFICIAL = ProtocolProfile(
    name="official",
    remaining_time_notes=False,
    retries_charged_to_wall_clock=True,
    sdk_default_retries=True,
    request_timeout_is_remaining_wall_time=True,
    login_shell=True,
    normalize_carriage_returns=True,
    timeout_exit_code_137=True,
    timed_out_from_exit_code=True,
    cap_commands_by_wall_clock=False,
    score_prediction_csv=True,
    strip_question=True,
    check_evaluator_limits=False,
    resource_markers=False,
    absolute_links_refused=True,
)

EXTENDED = ProtocolProfile(
    name="extended",
    remaining_time_notes=True,
    retries_charged_to_wall_clock=False,
    sdk_default_retries=False,
    request_timeout_is_remaining_wall_time=False,
    login_shell=False,
    normalize_carriage_returns=False,
    timeout_exit_code_137=False,
    timed_out_from_exit_code=False,
    cap_commands_by_wall_clock=True,
    score_prediction_csv=False,
    strip_question=True,
    check_evaluator_limits=True,
    resource_markers=True,
    absolute_links_refused=False,
)

PROFILES: dict[str, ProtocolProfile] = {p.name: p for p in (OFFICIAL, EXTENDED)}


def get_profile(name: str) -> ProtocolProfile:
    """The profile called ``name``.

    >>> get_profile("official").login_shell
    True
    >>> get_profile("paper")
    Traceback (most recent call last):
    ...
    ValueError: unknown protocol 'paper' (known: extended, official)
    """
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown protocol {name!r} (known: {known})") from None


def end_on_outage(harness: str, error: str, protocol: object) -> str:
    """The error of an attempt that a model-endpoint outage ended (relayed harnesses).

    The same rule as the metered client's: under a profile whose failed model requests end
    the attempt (``sdk_default_retries``: official) the outcome stays ``runtime_error`` and
    the caller marks its result ``endpoint_unreachable`` with the returned error; otherwise
    (extended) the outage is an infrastructure fault with code ``endpoint_unreachable``.

    Args:
        harness: the harness's name (the error's prefix).
        error: the relay's ``unreachable_error``.
        protocol: the attempt's ``protocol`` setting (a name, a profile or None).

    Raises:
        InfrastructureError: code ``endpoint_unreachable``, unless the profile says
            exhausted model retries are the agent's outcome.

    >>> end_on_outage("codex", "model endpoint x unreachable: refused", "official")
    'codex: model endpoint x unreachable: refused'
    """
    message = f"{harness}: {error}"[:500]
    if isinstance(protocol, ProtocolProfile):
        rules = protocol
    else:
        try:
            rules = get_profile(DEFAULT_PROTOCOL if protocol is None else str(protocol))
        except ValueError as exc:
            raise ConfigError(f"{harness}: {exc}") from None
    if not rules.sdk_default_retries:
        raise InfrastructureError(message, code=ENDPOINT_UNREACHABLE)
    return message


__all__ = [
    "DEFAULT_PROTOCOL",
    "EXTENDED",
    "OFFICIAL",
    "PROFILES",
    "ProtocolProfile",
    "end_on_outage",
    "get_profile",
]
