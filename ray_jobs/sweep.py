"""Delete every sandbox labelled with a run id (what a crashed controller left behind).

``python -m ray_jobs.sweep --run-id <run_id> [--backend NAME] [-o namespace=dataspace-sandboxes]``

The backend defaults to the cluster deployment's (``dataspace.sandbox.CLUSTER_BACKEND``).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

from dataspace.sandbox import CLUSTER_BACKEND, backend_names
from ray_jobs._common import parse_options, run_main, setup_logging


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """The sweep command's flags, resolved."""

    run_id: str | None
    backend: str = CLUSTER_BACKEND
    options: dict[str, Any] = field(default_factory=dict)
    every_run: bool = False
    verbose: bool = False


def parse_args(argv: list[str] | None = None) -> SweepConfig:
    """Flags -> ``SweepConfig``."""
    p = argparse.ArgumentParser(
        prog="python -m ray_jobs.sweep", description=__doc__.splitlines()[0]
    )
    p.add_argument("--run-id", help="the run whose sandboxes to delete")
    p.add_argument(
        "--every-run",
        action="store_true",
        help="delete every sandbox of every run the backend reaches",
    )
    p.add_argument(
        "--backend",
        default=CLUSTER_BACKEND,
        help=f"the sandbox backend ({', '.join(backend_names())}; default {CLUSTER_BACKEND})",
    )
    p.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a backend option (JSON value), e.g. -o namespace=sb",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    if not a.run_id and not a.every_run:
        p.error("give --run-id RUN (or --every-run)")
    return SweepConfig(
        run_id=a.run_id,
        backend=a.backend,
        every_run=a.every_run,
        options=parse_options(a.option, flag="--option"),
        verbose=a.verbose,
    )


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    cfg = parse_args(argv)
    setup_logging(cfg.verbose)

    def body() -> int:
        from dataspace.sandbox import get_backend

        backend = get_backend(cfg.backend, **cfg.options)
        labels = None if cfg.every_run else {"run": str(cfg.run_id)}
        count = backend.sweep(labels)
        what = "every run" if cfg.every_run else f"run {cfg.run_id}"
        print(f"deleted {count} sandboxes of {what} ({backend.describe()})")
        return 0

    return run_main(body)


if __name__ == "__main__":
    sys.exit(main())
