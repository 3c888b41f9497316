"""Build the report of one run (or compare several) from their store folders.

``ray job submit ... -- python -m ray_jobs.report s3://bucket/bench/runs/<run_id> [more runs]``
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from ray_jobs._common import run_main, setup_logging


@dataclass(frozen=True, kw_only=True)
class ReportJobConfig:
    """The report job's flags, resolved."""

    runs: tuple[str, ...]
    out: str | None = None
    release: str | None = None
    verbose: bool = False


def parse_args(argv: list[str] | None = None) -> ReportJobConfig:
    """Flags -> ``ReportJobConfig``."""
    p = argparse.ArgumentParser(
        prog="python -m ray_jobs.report", description=__doc__.splitlines()[0]
    )
    p.add_argument("runs", nargs="+", help="run folders (store URIs: <store>/runs/<run_id>)")
    p.add_argument("--out", help="output folder (default: the first run's folder)")
    p.add_argument("--release", help="release folder whose metadata drives the breakdowns")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    return ReportJobConfig(runs=tuple(a.runs), out=a.out, release=a.release, verbose=a.verbose)


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    cfg = parse_args(argv)
    setup_logging(cfg.verbose)

    def body() -> int:
        try:
            from dataspace.report import build_report
        except ImportError as exc:  # pragma: no cover - depends on the installed project
            print(f"error: the report builder is not importable here: {exc}", file=sys.stderr)
            return 2
        out = build_report(list(cfg.runs), out=cfg.out, release=cfg.release)
        print(f"report written to {out.out}: {out.html}")
        for note in out.notes:
            print(f"  note: {note}")
        return 0

    return run_main(body)


if __name__ == "__main__":
    sys.exit(main())
