"""``dataspace diff RELEASE_A RELEASE_B``: which tasks two releases add, remove or change.

Exit 0: identical, 1: different, 2: a release cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys

from dataspace.cli.args import NON_NEGATIVE_INT
from dataspace.errors import ReleaseError


def main(argv: list[str] | None = None) -> int:
    """``dataspace diff RELEASE_A RELEASE_B [--json] [--parts ...]``."""
    from dataspace.diff import PARTS, diff_releases, format_diff

    p = argparse.ArgumentParser(
        prog="dataspace diff", description="which tasks two releases add, remove or change"
    )
    p.add_argument("a", help="the old release folder")
    p.add_argument("b", help="the new release folder")
    p.add_argument("--json", action="store_true", help="print the full difference as JSON")
    p.add_argument(
        "--parts",
        nargs="+",
        choices=PARTS,
        default=list(PARTS),
        help="parts to compare (default: all)",
    )
    p.add_argument(
        "--limit", type=NON_NEGATIVE_INT, default=20, help="tasks listed per kind (default 20)"
    )
    args = p.parse_args(argv)
    try:
        d = diff_releases(args.a, args.b, parts=args.parts)
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(d.to_json(), ensure_ascii=False, indent=1))
    else:
        print("\n".join(format_diff(d, limit=args.limit)))
    return 0 if d.identical else 1


__all__ = ["main"]
