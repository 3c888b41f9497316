"""Agents and harness adapters, registered by name."""

from __future__ import annotations

import importlib

from dataspace.agents.base import (
    END_STATES,
    Agent,
    AgentContext,
    AgentLimits,
    AgentResult,
    EventLog,
    Usage,
)
from dataspace.errors import ConfigError

# harness name -> "module:Class"; modules are imported only when chosen.
_HARNESSES: dict[str, str] = {
    "gold": "dataspace.agents.gold:GoldAgent",
    "dataspace-agent": "dataspace.agents.dataspace_agent:DataSpaceAgent",
    "smolagents": "dataspace.agents.smolagents_adapter:SmolagentsAgent",
    "codex": "dataspace.agents.native.codex:CodexAgent",
    "claude-code": "dataspace.agents.native.claude_code:ClaudeCodeAgent",
    "grok-build": "dataspace.agents.native.grok_build:GrokBuildAgent",
}


def register_harness(name: str, target: str) -> None:
    """Register a harness implementation as ``"module:Class"``."""
    _HARNESSES[name] = target


def harness_names() -> list[str]:
    """Every registered harness name."""
    return sorted(_HARNESSES)


def get_agent(harness: str, **settings: object) -> Agent:
    """Instantiate the harness named ``harness`` with its settings."""
    try:
        target = _HARNESSES[harness]
    except KeyError:
        raise ConfigError(
            f"unknown harness {harness!r}; known harnesses: {', '.join(harness_names())}"
        ) from None
    module_name, cls_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"harness {harness!r} needs a missing package: {exc.name}; "
            "install the project with its dependencies (pip install -e .)"
        ) from exc
    cls = getattr(module, cls_name)
    return cls(**settings) if settings else cls()


__all__ = [
    "END_STATES",
    "Agent",
    "AgentContext",
    "AgentLimits",
    "AgentResult",
    "EventLog",
    "Usage",
    "get_agent",
    "harness_names",
    "register_harness",
]
