"""``dataspace run SPEC``: run (or resume) a run spec, with a live status per agent."""

from __future__ import annotations

import argparse
import time
from typing import Any

from dataspace.cli.args import POSITIVE_INT
from dataspace.cli.screen import EXIT_CODES_HELP, exit_code, live_status, print_outcome


def add_parser(sub: Any) -> None:
    """Register ``run`` on the main parser's subparsers."""
    r = sub.add_parser(
        "run",
        help="run (or resume) a run spec",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("spec", help="run spec (YAML or JSON)")
    r.add_argument("--concurrency", type=POSITIVE_INT, help="override the spec's concurrency")
    r.add_argument(
        "--retry",
        action="append",
        default=[],
        metavar="MARK",
        help="also rerun the finished attempts so marked (endpoint_unreachable: an outage "
        "of the model endpoint ended them); the earlier try is kept under tries/",
    )
    r.add_argument(
        "--release-cache",
        help="where a release given as a store URI is synced (default: $DATASPACE_RELEASE_CACHE "
        "or ~/.cache/dataspace/releases)",
    )
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Resolve the spec, execute the run, print the outcome; the exit code says if complete."""
    from dataspace.report.basic import write_finished_page
    from dataspace.runs.controller import execute_run
    from dataspace.runs.resolve import Overrides, resolve_spec
    from dataspace.runs.spec import load_spec

    t0 = time.monotonic()
    spec = resolve_spec(
        load_spec(args.spec),
        Overrides(concurrency=args.concurrency),
        release_cache=args.release_cache,
    )
    with live_status(f"run {spec.run_id}") as progress:
        outcome = execute_run(
            spec,
            progress=progress,
            retry=retry_marks(args.retry),
            on_finished=write_finished_page,
        )
    print_outcome(outcome, started=t0)
    return exit_code(outcome)


def retry_marks(values: list[str]) -> tuple[str, ...]:
    """``--retry a --retry b,c`` -> ``("a", "b", "c")``.

    >>> retry_marks(["a", "b, c", ""])
    ('a', 'b', 'c')
    """
    return tuple(m.strip() for v in values for m in v.split(",") if m.strip())


__all__ = ["add_parser", "retry_marks", "run"]
