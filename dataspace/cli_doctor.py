"""``dataspace doctor``, ``dataspace convert`` and ``dataspace harnesses``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_commands(sub: Any) -> None:
    """Register the three subcommands on the main parser's subparsers."""
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
    d.set_defaults(func=_cmd_doctor)

    c = sub.add_parser(
        "convert",
        help="turn the official baseline's vercel.yaml [and harness.yaml] into a run spec",
    )
    c.add_argument("config", help="the official models config (baseline/configs/vercel.yaml)")
    c.add_argument("harness", nargs="?", help="the official harness.yaml (optional)")
    c.add_argument("-o", "--out", help="write the spec here (default: print it)")
    c.add_argument("--release", help="release folder or URI (default: a FILL_IN placeholder)")
    c.add_argument("--store", help="store folder or URI (default: a FILL_IN placeholder)")
    c.add_argument("--run-id", default="official", help="run id (default: official)")
    c.add_argument(
        "--model",
        action="append",
        default=[],
        help="only this model key of the config (repeatable; default: every model)",
    )
    c.set_defaults(func=_cmd_convert)

    h = sub.add_parser("harnesses", help="list the harnesses, their versions and installed state")
    h.set_defaults(func=_cmd_harnesses)


def _cmd_doctor(args: argparse.Namespace) -> int:
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
        from dataspace.runs.controller import pending_attempts
        from dataspace.runs.plan import estimate_run

        for line in estimate_run(spec, pending_attempts(spec)).lines():
            print(line)
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    from dataspace.convert import convert_official, dump_spec

    spec = convert_official(
        Path(args.config),
        Path(args.harness) if args.harness else None,
        release=args.release,
        store=args.store,
        run_id=args.run_id,
        models=args.model or None,
    )
    text = dump_spec(spec.document, notes=spec.notes)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out} ({len(spec.document['agents'])} agents)")
    else:
        sys.stdout.write(text)
    for note in spec.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def _cmd_harnesses(_args: argparse.Namespace) -> int:
    from dataspace.agents import harness_info

    rows = harness_info()
    width = max(len(r.name) for r in rows)
    for r in rows:
        state = "installed" if r.installed else f"not installed ({r.missing})"
        print(f"{r.name:<{width}}  {r.version or '-':<10}  {state}")
    return 0
