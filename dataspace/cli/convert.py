"""``dataspace convert``: the official baseline's ``vercel.yaml`` (and harness) as a run spec."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    """Register ``convert`` on the main parser's subparsers."""
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
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write (or print) the converted spec, then its notes on stderr."""
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


__all__ = ["add_parser", "run"]
