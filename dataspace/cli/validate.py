"""``dataspace validate RELEASE``: check a release folder (tasks, configs, gold)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    """Register ``validate`` on the main parser's subparsers."""
    v = sub.add_parser("validate", help="check a release folder (tasks, configs, gold)")
    v.add_argument("release", help="release: a folder or store URI (file://..., s3://...)")
    v.add_argument("--require-gold", action="store_true")
    v.add_argument(
        "--release-cache",
        help="where a release given as a store URI is synced (default: $DATASPACE_RELEASE_CACHE "
        "or ~/.cache/dataspace/releases)",
    )
    v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check the release and print its counts."""
    from dataspace.release import Release
    from dataspace.runs.resolve import default_release_cache, local_release

    # a store URI (s3://...) is synced into the release cache first, as `run` does
    root = local_release(args.release, cache=args.release_cache or default_release_cache())
    rel = Release(root)
    counts = rel.check(require_gold=args.require_gold)
    where = f"{args.release} (synced to {rel.root})" if "://" in args.release else rel.root
    print(f"{where}: {len(counts.tasks)} tasks, all valid; {counts.describe()}")
    return 0


__all__ = ["add_parser", "run"]
