"""``python -m dataspace.agents.native.install [NAME ...] [--from PATH] [--check]``.

Installs the native harness CLIs at their pinned versions (every registry-served one by
default), or with ``--check`` only reports their states. Exit 1 when one is not ready.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Install (or check) each named harness and print one line per harness."""
    from dataspace.agents.native.install import install_harnesses

    parser = argparse.ArgumentParser(prog="python -m dataspace.agents.native.install")
    parser.add_argument("names", nargs="*", help="harnesses (default: every npm-served one)")
    parser.add_argument("--from", dest="source", type=Path, help="Grok Build binary/installer")
    parser.add_argument("--check", action="store_true", help="only report the states")
    args = parser.parse_args(argv)
    code = 0
    for out in install_harnesses(args.names, check=args.check, source=args.source):
        if out.state is None:
            print(f"{out.name}: error: {out.error}", file=sys.stderr)
            code = 1
            continue
        state = out.state
        line = f"{out.name} {state.pinned}: " + (
            "ready" if state.ready else f"not ready ({state.problem})"
        )
        print(line)
        code = code or (0 if state.ready else 1)
    return code


__all__ = ["main"]
