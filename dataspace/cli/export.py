"""``dataspace export RUN --agent A --out DIR``: write a run's submission bundle."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dataspace.cli.args import POSITIVE_INT


def add_parser(sub: Any) -> None:
    """Register ``export`` on the main parser's subparsers."""
    x = sub.add_parser("export", help="write a run's submission bundle (one agent)")
    x.add_argument("run", help="run folder: a path or store URI (file://..., s3://...)")
    x.add_argument("--agent", required=True, help="the agent (name in the run spec)")
    x.add_argument("--out", required=True, help="bundle folder to create")
    x.add_argument("--attempt", type=POSITIVE_INT, default=1, help="which attempt (default 1)")
    x.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the bundle and print what it holds."""
    from dataspace.runs.export import export_bundle

    bundle = export_bundle(args.run, agent=args.agent, out=Path(args.out), attempt=args.attempt)
    for line in bundle.describe():
        print(line)
    return 0


__all__ = ["add_parser", "run"]
