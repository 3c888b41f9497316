"""The native CLI harnesses (Codex, Claude Code, Grok Build) and their installation.

The adapters live in ``codex.py``, ``claude_code.py`` and ``grok_build.py`` on the shared
``runner.py``; ``install.py`` pins, installs and reports them (``harness_status()`` for
``dataspace doctor`` and ``dataspace harnesses``). Importing this package imports none of
them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["harness_status"]


def harness_status() -> Any:
    """Each native harness's pinned and installed version and state (``HarnessState``)."""
    from dataspace.agents.native.install import harness_status as status

    return status()
