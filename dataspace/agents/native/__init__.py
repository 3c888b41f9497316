"""The native CLI harnesses (Codex, Claude Code, Grok Build) and their installation.

The adapters live in ``codex.py``, ``claude_code.py`` and ``grok_build.py`` on the shared
``runner.py``; ``install.py`` pins, installs and reports them. Importing this package is
cheap: it imports neither the adapters nor the relay.
"""

from __future__ import annotations

from dataspace.agents.native.install import PINS, HarnessPin, HarnessState, harness_status

__all__ = ["PINS", "HarnessPin", "HarnessState", "harness_status"]
