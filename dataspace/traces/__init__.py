"""Attempt traces: the event schema (one class per kind), the writer and model usage.

Lowest layer of the run machinery: harnesses, the metered LLM client and the relays write
through :class:`EventLog`; the report reads back with :func:`read_events` and
:mod:`dataspace.report.conversation`. Nothing here imports another DataSpace package.
"""

from __future__ import annotations

from dataspace.traces.events import (
    EVENT_CLASSES,
    EVENT_TYPES,
    EVENTS_NAME,
    OMITTED,
    TRACE_SCHEMA,
    AgentEnd,
    AgentStart,
    AttemptStart,
    Error,
    Event,
    HarnessOutput,
    HarnessTrace,
    Image,
    ModelCall,
    ModelRefused,
    ModelRetry,
    ModelTurn,
    ProtocolReminder,
    RelayedCall,
    Submit,
    Tool,
    ToolResult,
    TraceEvent,
)
from dataspace.traces.log import EventLog
from dataspace.traces.read import read_events
from dataspace.traces.usage import USAGE_FIELDS, Usage, usage_matches

__all__ = [
    "EVENTS_NAME",
    "EVENT_CLASSES",
    "EVENT_TYPES",
    "OMITTED",
    "TRACE_SCHEMA",
    "USAGE_FIELDS",
    "AgentEnd",
    "AgentStart",
    "AttemptStart",
    "Error",
    "Event",
    "EventLog",
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
    "Usage",
    "read_events",
    "usage_matches",
]
