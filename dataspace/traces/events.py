"""The attempt trace's schema: one typed class per event kind.

Every attempt leaves ``attempts/<agent>/<task>/<n>/events.jsonl`` (:data:`EVENTS_NAME`): one
JSON object per line, appended as things happen by :class:`dataspace.traces.EventLog`. Every
line has

- ``t``: seconds since the attempt started (a float; events are in time order);
- ``type``: the event's kind (``kind`` of the classes below);

and then the event's fields, in the order the class declares them. A field left out when the
event was made (``OMITTED``, the default of every optional field) is not written; a field
given as None is written as ``null``.

The first event of an attempt is :class:`AttemptStart` and carries ``schema``
(:data:`TRACE_SCHEMA`, ``"dataspace.trace/1"``). A reader accepts any event it does not know
(it is shown as its fields) and any field it does not know, so a harness may add both; it
must not change the meaning of a field listed here. A line that is not JSON is kept as text.

Native command-line harnesses (Codex, Claude Code, Grok Build) run their own loop inside the
sandbox; their log holds what the relay saw (:class:`RelayedCall`, :class:`ModelRefused`)
and what the CLI printed (:class:`HarnessOutput`); the report's reader
(:mod:`dataspace.report.native_trace`) turns those into the events the other harnesses
write.

>>> Submit(path="/output/prediction.csv").payload()
{'path': '/output/prediction.csv'}
>>> Tool(name="write_file", path="p.csv").payload()
{'name': 'write_file', 'path': 'p.csv'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, get_args

TRACE_SCHEMA = "dataspace.trace/1"
EVENTS_NAME = "events.jsonl"


class _Omitted:
    """The default of an optional field: the field is not written."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Any = _Omitted()


@dataclass(frozen=True, kw_only=True)
class Event:
    """One line of a trace; ``kind`` is its ``type``."""

    kind: ClassVar[str] = ""

    def payload(self) -> dict[str, Any]:
        """The fields that are written, in declaration order (``OMITTED`` ones left out)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not OMITTED:
                out[f.name] = value
        return out


@dataclass(frozen=True, kw_only=True)
class AttemptStart(Event):
    """The attempt began; ``question`` is the task's question as the agent received it."""

    kind: ClassVar[str] = "attempt_start"
    schema: str = TRACE_SCHEMA
    task: str = OMITTED
    agent: str = OMITTED
    attempt: int = OMITTED
    try_index: int = OMITTED
    key: str = OMITTED
    question: str = OMITTED


@dataclass(frozen=True, kw_only=True)
class AgentStart(Event):
    """The harness began: its model, prompts (the texts), limits and settings.

    ``system_prompt`` is the text, ``user_prompt`` the first user message; the native
    harnesses add ``wire``, ``version``, ``upstream`` and ``harness_config``.
    """

    kind: ClassVar[str] = "agent_start"
    harness: str = OMITTED
    model: str = OMITTED
    base_url: str | None = OMITTED
    wire: str = OMITTED
    version: str | None = OMITTED
    prompt_contract: str = OMITTED
    protocol: str = OMITTED
    upstream: str = OMITTED
    system_prompt_sha256: str = OMITTED
    system_prompt: str = OMITTED
    user_prompt: str = OMITTED
    limits: Mapping[str, Any] = OMITTED
    settings: Mapping[str, Any] = OMITTED
    harness_config: Mapping[str, Any] = OMITTED


@dataclass(frozen=True, kw_only=True)
class ModelRetry(Event):
    """A failed model request that will be retried (a fault of the model endpoint).

    ``retry`` is 1, 2, ...
    """

    kind: ClassVar[str] = "model_retry"
    retry: int
    error: str
    delay_seconds: float = OMITTED
    request_seconds: float = OMITTED


@dataclass(frozen=True, kw_only=True)
class ModelCall(Event):
    """One model request that returned, with its metered usage.

    The token and cost fields of all ``model_call`` events of an attempt add up to the
    attempt's results row; every model request a harness makes is metered this way (by
    :class:`dataspace.llm.client.MeteredClient`, also behind the relay of in-sandbox
    harnesses).
    """

    kind: ClassVar[str] = "model_call"
    model: str
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float
    latency_seconds: float
    retries: int = OMITTED
    retry_seconds: float = OMITTED
    queue_seconds: float = OMITTED


@dataclass(frozen=True, kw_only=True)
class RelayedCall(Event):
    """One request a native harness made through the wire relay (type ``model_call``).

    ``wire`` is ``responses``, ``messages`` or ``chat``; ``request`` is the request body as
    JSON text and ``raw`` the reply as it streamed, each cut at the relay's ``TRACE_BYTES``
    (``*_truncated`` says so). A call with status 200 is a model call (``seconds`` its
    latency); any other status is one the harness retried (it used no tokens).
    """

    kind: ClassVar[str] = "model_call"
    wire: str
    status: int
    seconds: float
    queue_seconds: float
    model: Any
    reply_model: str | None
    finish: str | None
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    cost_usd: float
    images_omitted: int
    request: str
    request_truncated: bool
    raw: str
    raw_truncated: bool


@dataclass(frozen=True, kw_only=True)
class ModelTurn(Event):
    """What the model answered in the latest ``model_call``.

    ``tool_calls`` is a list of ``{"id", "name", "arguments"}``, arguments as the JSON text
    the model wrote. A harness whose stream has no separate usage record may write the
    ``model_call`` usage fields into a ``model_turn`` line; the reader treats it as both.
    """

    kind: ClassVar[str] = "model_turn"
    turn: int
    content: str | None = OMITTED
    reasoning: str | None = OMITTED
    tool_calls: Sequence[Mapping[str, Any]] = OMITTED
    finish_reason: str | None = OMITTED
    response_id: str | None = OMITTED
    resolved_model: str | None = OMITTED


@dataclass(frozen=True, kw_only=True)
class ToolResult(Event):
    """One executed tool call; ``tool_call_id`` links it to the ``model_turn`` call.

    ``result`` is the observation the model received: for ``bash`` ``{"exit_code",
    "stdout", "stderr", "timed_out", "duration_seconds", "stdout_truncated",
    "stderr_truncated"}``, for failures ``{"ok": false, "error_type", "error"}``.
    """

    kind: ClassVar[str] = "tool_result"
    action: int
    tool_call_id: str
    tool: str
    arguments: Any = OMITTED
    result: Any = OMITTED


@dataclass(frozen=True, kw_only=True)
class Tool(Event):
    """A tool action that no model requested (the ``gold`` harness)."""

    kind: ClassVar[str] = "tool"
    name: str
    command: str = OMITTED
    path: str = OMITTED
    exit_code: int | None = OMITTED
    stdout: str = OMITTED
    stderr: str = OMITTED


@dataclass(frozen=True, kw_only=True)
class Image(Event):
    """An image the model was shown (``data_url``: ``data:image/...;base64,...``)."""

    kind: ClassVar[str] = "image"
    tool_call_id: str = OMITTED
    path: str | None = OMITTED
    data_url: str = OMITTED


@dataclass(frozen=True, kw_only=True)
class ProtocolReminder(Event):
    """The harness reminded the model of the protocol."""

    kind: ClassVar[str] = "protocol_reminder"
    turn: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class HarnessTrace(Event):
    """An in-sandbox harness's own record, read after it ended.

    ``steps`` has one entry per model step: ``step_number``, ``model_output``,
    ``tool_calls`` as ``[{"id", "function": {"name", "arguments"}}]``, ``code_action``,
    ``observations``, ``error``, ``plan``. The reader pairs the k-th step with the k-th
    ``model_call``.
    """

    kind: ClassVar[str] = "harness_trace"
    state: str | None = OMITTED
    smolagents_version: str | None = OMITTED
    harness_usage: Any = OMITTED
    steps: Any = OMITTED
    error: Any = OMITTED
    exit_code: int | None = OMITTED
    stderr: str | None = OMITTED


@dataclass(frozen=True, kw_only=True)
class HarnessOutput(Event):
    """A native CLI's own stream, read after it ended.

    ``stdout`` holds ``codex exec --json`` JSON lines, Claude Code's ``stream-json`` or
    Grok Build's ``streaming-json``.
    """

    kind: ClassVar[str] = "harness_output"
    harness: str
    exit_code: int | None
    timed_out: bool
    signal: Any
    stdout: str
    stderr: str


@dataclass(frozen=True, kw_only=True)
class ModelRefused(Event):
    """The relay refused a model other than the attempt's (``allowed``)."""

    kind: ClassVar[str] = "model_refused"
    wire: str
    model: Any
    allowed: str


@dataclass(frozen=True, kw_only=True)
class Submit(Event):
    """The agent submitted an answer at ``path`` (``scored_path``: the snapshot's file)."""

    kind: ClassVar[str] = "submit"
    path: str | None
    scored_path: str | None = OMITTED
    sha256: str | None = OMITTED


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    """Something went wrong in the harness.

    With ``severity: "warning"``: a notice the harness gave that did not stop it.
    """

    kind: ClassVar[str] = "error"
    message: str
    severity: str = OMITTED


@dataclass(frozen=True, kw_only=True)
class AgentEnd(Event):
    """The harness ended: its end state, counts, working seconds and ``usage`` (the totals).

    Harnesses add their own counters (``queue_seconds``, ``bridge_requests``,
    ``relay_calls``, ``refused_models``).
    """

    kind: ClassVar[str] = "agent_end"
    end_state: str
    model_turns: int
    tool_actions: int
    submitted_path: str | None
    error: str | None
    working_seconds: float
    usage: Mapping[str, Any]
    queue_seconds: float = OMITTED
    bridge_requests: int = OMITTED
    relay_calls: int = OMITTED
    refused_models: Sequence[str] = OMITTED


TraceEvent = (
    AttemptStart
    | AgentStart
    | ModelRetry
    | ModelCall
    | RelayedCall
    | ModelTurn
    | ToolResult
    | Tool
    | Image
    | ProtocolReminder
    | HarnessTrace
    | HarnessOutput
    | ModelRefused
    | Submit
    | Error
    | AgentEnd
)
"""Every event a harness writes."""

EVENT_CLASSES: tuple[type[Event], ...] = get_args(TraceEvent)
"""The class of every event kind, in the order of ``TraceEvent``."""
EVENT_TYPES: tuple[str, ...] = tuple(dict.fromkeys(c.kind for c in EVENT_CLASSES))
"""The ``type`` of every event kind, in the order above."""

__all__ = [
    "EVENTS_NAME",
    "EVENT_CLASSES",
    "EVENT_TYPES",
    "OMITTED",
    "TRACE_SCHEMA",
    "AgentEnd",
    "AgentStart",
    "AttemptStart",
    "Error",
    "Event",
    "HarnessOutput",
    "HarnessTrace",
    "Image",
    "ModelCall",
    "ModelRefused",
    "ModelRetry",
    "ModelTurn",
    "ProtocolReminder",
    "RelayedCall",
    "Submit",
    "Tool",
    "ToolResult",
    "TraceEvent",
]
