"""``dataspace demo``: build the bundled mini benchmark, run the gold oracle, score, report."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from dataspace.cli.args import POSITIVE_INT
from dataspace.cli.screen import live_status, print_outcome


def add_parser(sub: Any) -> None:
    """Register ``demo`` on the main parser's subparsers."""
    from dataspace.runs.spec import RunSpec

    d = sub.add_parser("demo", help="build the bundled mini benchmark, run gold, score, report")
    d.add_argument("--out", default="demo-out", help="output folder (default: ./demo-out)")
    d.add_argument(
        "--concurrency",
        type=POSITIVE_INT,
        help=f"attempts at once (default {RunSpec.concurrency}, a run spec's)",
    )
    d.add_argument(
        "--build-cache",
        help="the build's item cache, reused across demo folders (default: OUT/.build-cache)",
    )
    d.add_argument(
        "--backend",
        help="the attempts' sandbox backend (default local; docker runs each in a container)",
    )
    d.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; exit 1 when the gold oracle does not score 100%."""
    from dataspace.demo import run_demo

    t0 = time.monotonic()
    with live_status("run demo") as progress:

        def build_progress(done: int, total: int, _result: Any) -> None:
            progress({"event": "build", "done": done, "total": total})

        outcome = run_demo(
            Path(args.out),
            concurrency=args.concurrency,
            progress=progress,
            build_progress=build_progress,
            build_cache=args.build_cache,
            backend=args.backend,
        )
    rep = outcome.build_report
    print(
        f"built {len(rep.accepted)} tasks into {outcome.release_dir} "
        f"({len(rep.rejected)} items rejected; see "
        f"{outcome.release_dir.parent / 'build_report.json'}) in {outcome.build_seconds:.1f} s"
    )
    print_outcome(outcome.run)
    print(f"total demo time {time.monotonic() - t0:.1f} s")
    if not outcome.ok:
        print(
            f"DEMO FAILED: the gold oracle did not pass {len(outcome.failures)} of "
            f"{len(outcome.run.rows)} attempts; the oracle must score 100%, so this is a "
            "bug. Failing attempts:",
            file=sys.stderr,
        )
        for r in outcome.failures[:20]:
            print(
                f"  {r['task_id']}: status={r['status']} error_code={r.get('error_code')} "
                f"error={r.get('error')}",
                file=sys.stderr,
            )
        return 1
    return 0


__all__ = ["add_parser", "run"]
