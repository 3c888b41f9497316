"""``dataspace plan SPEC``: estimate a run's attempts, model calls, tokens, cost and time."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    """Register ``plan`` on the main parser's subparsers."""
    pl = sub.add_parser(
        "plan",
        help="estimate a run's attempts, model calls, tokens, cost and wall time",
        description="What the run of SPEC will use, per agent and in total, with a range: "
        "from earlier runs of the same model and harness in the spec's store, else from the "
        "paper's per-backbone figures. With earlier runs of two agents, also the tasks x "
        "attempts needed to tell them apart.",
    )
    pl.add_argument("spec", help="run spec (YAML or JSON)")
    pl.add_argument("--level", type=float, default=0.95, help="level of the ranges (default 0.95)")
    pl.add_argument(
        "--difference",
        type=float,
        help="the accuracy difference (points) the sample sizes are for "
        "(default: each pair's observed difference)",
    )
    pl.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the estimate of the run's pending attempts."""
    from dataspace.errors import ConfigError
    from dataspace.runs.controller import estimate_pending
    from dataspace.runs.spec import load_spec

    if not 0.0 < args.level < 1.0:
        raise ConfigError(f"--level {args.level}: give a level between 0 and 1, e.g. 0.95")
    if args.difference is not None and not 0.0 < args.difference < 100.0:
        raise ConfigError(f"--difference {args.difference}: give points between 0 and 100")
    est = estimate_pending(
        load_spec(args.spec),
        level=args.level,
        difference=args.difference / 100.0 if args.difference else None,
    )
    for line in est.lines():
        print(line)
    return 0


__all__ = ["add_parser", "run"]
