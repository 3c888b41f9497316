"""``dataspace harnesses``: every harness, its version and whether it is installed."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    """Register ``harnesses`` on the main parser's subparsers."""
    h = sub.add_parser("harnesses", help="list the harnesses, their versions and installed state")
    h.set_defaults(func=run)


def run(_args: argparse.Namespace) -> int:
    """Print one line per harness."""
    from dataspace.agents import harness_info

    rows = harness_info()
    width = max(len(r.name) for r in rows)
    for r in rows:
        state = "installed" if r.installed else f"not installed ({r.missing})"
        print(f"{r.name:<{width}}  {r.version or '-':<10}  {state}")
    return 0


__all__ = ["add_parser", "run"]
