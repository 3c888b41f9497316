"""``dataspace doctor [SPEC]``: the preflight checks of a run spec, or of this machine."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    """Register ``doctor`` on the main parser's subparsers."""
    d = sub.add_parser(
        "doctor",
        help="check a run spec before running it (or, without one, this machine)",
        description="Preflight: with SPEC, every check a run makes before it records "
        "anything (keys, one minimal metered call per model, prices, sandbox, release, store, "
        "Ray); without, this machine (sandbox isolation, workbench tools, harness binaries). "
        "Exit code 0 when everything passed, 2 otherwise.",
    )
    d.add_argument("spec", nargs="?", help="run spec (YAML or JSON)")
    d.add_argument("--no-model-calls", action="store_true", help="skip the metered calls")
    d.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print each check as it finishes, then the verdict (and, with a spec, the estimate)."""
    from dataspace.runs import preflight

    def show(check: Any) -> None:
        print(check.line(), flush=True)

    if args.spec:
        from dataspace.runs.resolve import resolve_spec
        from dataspace.runs.spec import load_spec

        spec = resolve_spec(load_spec(args.spec))
        report = preflight.check_spec(spec, call_models=not args.no_model_calls, on_check=show)
    else:
        report = preflight.check_machine(on_check=show)
    n = len(report.problems)
    cost = f"; metered calls cost ${report.cost_usd:.6f}" if report.cost_usd else ""
    if n:
        print(f"{n} problem{'s' * (n != 1)} found{cost}", file=sys.stderr)
        return 2
    print(f"all {len(report.checks)} checks passed{cost}")
    if args.spec:
        from dataspace.runs.controller import estimate_pending

        for line in estimate_pending(spec).lines():
            print(line)
    return 0


__all__ = ["add_parser", "run"]
