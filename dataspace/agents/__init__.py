"""Agents and harness adapters, registered by name."""

from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass

from dataspace.agents.base import (
    END_STATES,
    Agent,
    AgentContext,
    AgentLimits,
    AgentResult,
    PredictionSnapshot,
)
from dataspace.registry import Registry

HARNESSES: Registry[type[Agent]] = Registry(
    "harness",
    {
        "gold": "dataspace.agents.gold:GoldAgent",
        "dataspace-agent": "dataspace.agents.dataspace_agent:DataSpaceAgent",
        "smolagents": "dataspace.agents.smolagents_adapter:SmolagentsAgent",
        "codex": "dataspace.agents.native.codex:CodexAgent",
        "claude-code": "dataspace.agents.native.claude_code:ClaudeCodeAgent",
        "grok-build": "dataspace.agents.native.grok_build:GrokBuildAgent",
    },
    plural="harnesses",
)
"""Harness name -> its agent class; modules are imported only when chosen."""


def register_harness(name: str, target: str) -> None:
    """Register a harness implementation as ``"module:Class"``."""
    HARNESSES.register(name, target)


def harness_names() -> list[str]:
    """Every registered harness name."""
    return HARNESSES.names()


def harness_target(name: str) -> str | None:
    """The ``"module:Class"`` of a harness, without importing it (None when unknown)."""
    return HARNESSES.target(name)


@dataclass(frozen=True, kw_only=True)
class HarnessInfo:
    """One registered harness: its version and whether it can run here."""

    name: str
    version: str | None
    installed: bool
    missing: str | None = None


def harness_info() -> list[HarnessInfo]:
    """Every registered harness with its version and installed state.

    A harness is installed when its module imports, the native binary it names (class
    attribute ``binary``) is on PATH, and its ``install_problem()`` (where it has one, e.g.
    smolagents' own package folder) says nothing; its version is the class attribute
    ``version``, else that of the package it wraps (``package``), else the project's.
    """
    from importlib.metadata import PackageNotFoundError, version

    from dataspace.agents.native.install import PINS as native_pins
    from dataspace.agents.native.install import harness_state

    out = []
    for name in harness_names():
        module_name, _, cls_name = (HARNESSES.target(name) or ":").partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), cls_name)
        except ImportError as exc:
            out.append(HarnessInfo(name=name, version=None, installed=False, missing=exc.name))
            continue
        ver = getattr(cls, "version", None)
        package = getattr(cls, "package", None)
        missing = None
        if ver is None:
            try:
                ver = version(package or "dataspace")
            except PackageNotFoundError:
                missing = f"package {package}"
        binary = getattr(cls, "binary", None)
        if binary and shutil.which(binary) is None:
            missing = f"{binary} not on PATH"
        problem = getattr(cls, "install_problem", None)
        if callable(problem):
            missing = problem()
        if name in native_pins:
            state = harness_state(name)
            ver = state.installed or state.pinned
            missing = None if state.ready else f"{state.problem}; {state.fix}"
        out.append(HarnessInfo(name=name, version=ver, installed=missing is None, missing=missing))
    return out


def get_agent(harness: str, **settings: object) -> Agent:
    """Instantiate the harness named ``harness`` with its settings.

    Raises:
        ConfigError: unknown harness (the message lists the known ones), or its module
            cannot be imported.
    """
    cls = HARNESSES.factory(harness)
    return cls(**settings) if settings else cls()


__all__ = [
    "END_STATES",
    "HARNESSES",
    "Agent",
    "AgentContext",
    "AgentLimits",
    "AgentResult",
    "HarnessInfo",
    "PredictionSnapshot",
    "get_agent",
    "harness_info",
    "harness_names",
    "harness_target",
    "register_harness",
]
