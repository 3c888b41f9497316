"""``dataspace report RUN...``: tables, figures, an HTML report and trace pages."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dataspace.errors import DataSpaceError


def main(argv: Sequence[str] | None = None) -> int:
    """``dataspace report RUN... [--out DIR] [--release DIR] [--traces new|all|none]``.

    Prints where the report was written; errors are one line on stderr (exit status 2).
    """
    from dataspace.report.build import ASSETS, build_report
    from dataspace.report.tracepages import TRACE_MODES
    from dataspace.stats import DEFAULT_LEVEL

    parser = argparse.ArgumentParser(
        prog="dataspace report",
        description="Tables, figures, an HTML report and trace pages from one or more runs.",
    )
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run folder: a path or store URI such as file:///x/runs/demo "
        "or s3://bucket/prefix/runs/demo",
    )
    parser.add_argument("--out", help="output folder (default: the first run's folder)")
    parser.add_argument(
        "--release",
        help="release folder whose metadata/ annotations drive "
        "the breakdowns by task characteristic",
    )
    parser.add_argument(
        "--traces",
        choices=TRACE_MODES,
        default="new",
        help="trace pages per attempt: write the missing ones (new, the "
        "default), rewrite all, or none",
    )
    parser.add_argument(
        "--allow-mixed",
        action="store_true",
        help="compare runs made on different releases (refused by default; the report "
        "then says so at its top)",
    )
    parser.add_argument(
        "--level",
        type=float,
        default=DEFAULT_LEVEL,
        help=f"confidence level of every interval and test (default {DEFAULT_LEVEL})",
    )
    parser.add_argument(
        "--review-url",
        help="the review console's address (dataspace review serve); the tasks no agent "
        "solved link to it",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        res = build_report(
            args.runs,
            out=args.out,
            release=args.release,
            traces=args.traces,
            allow_mixed=args.allow_mixed,
            level=args.level,
            review_url=args.review_url,
        )
    except DataSpaceError as exc:
        print(f"dataspace report: error: {exc}", file=sys.stderr)
        return 2
    print(f"report:   {res.html}")
    print(f"markdown: {res.markdown}")
    print(f"tables:   {len(res.tables)} in {res.out.rstrip('/')}/{ASSETS}/tables/")
    print(f"traces:   {res.traces} pages written, {res.traces_kept} kept")
    for note in res.notes:
        print(f"note:     {note}")
    return 0


__all__ = ["main"]
