"""``dataspace rescore RUN``: score a run's stored predictions again, without model calls."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dataspace.errors import DataSpaceError


def main(argv: Sequence[str] | None = None) -> int:
    """``dataspace rescore RUN [--release DIR]``: prints what changed; exit 2 on errors.

    Exit status 1 when some attempts could not be rescored (their rows were kept).
    """
    from dataspace.rescore import rescore

    p = argparse.ArgumentParser(
        prog="dataspace rescore",
        description="Score a run's stored predictions again with the current evaluator and "
        "configs, without calling any model; the new results go beside the old.",
    )
    p.add_argument("run", metavar="RUN", help="run folder (path or store URI)")
    p.add_argument(
        "--release",
        help="release folder or store URI (default: the run's, from spec.json)",
    )
    args = p.parse_args(list(argv) if argv is not None else None)
    try:
        out = rescore(args.run, release=args.release)
    except DataSpaceError as exc:
        print(f"dataspace rescore: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"rescored {out.rescored} attempts ({out.kept} kept as they were): "
        f"{len(out.changes)} verdict(s) changed"
    )
    for c in out.changes:
        print(f"  {c.line()}")
    for problem in out.problems:
        print(f"not rescored: {problem}", file=sys.stderr)
    print(f"results:  {out.results}")
    return 1 if out.problems else 0


__all__ = ["main"]
