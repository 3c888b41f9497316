"""The official evaluator's command line: ``python -m evaluator`` or ``dataspace eval``.

::

    python -m evaluator --prediction-root P --gold-root G --config-root C [--output FILE]

Writes the summary to ``FILE`` (default ``P/evaluation_summary.json``), prints it without the
per-task entries, and exits 0; on a fatal error prints one line to stderr and exits 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from evaluator.errors import FatalError
from evaluator.suite import EVALUATOR_NAME, evaluate_suite

logger = logging.getLogger(__name__)


def _parser(prog: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=EVALUATOR_NAME)
    parser.add_argument(
        "--prediction-root",
        required=True,
        type=Path,
        help="Directory containing task_N/prediction.csv files.",
    )
    parser.add_argument(
        "--gold-root", required=True, type=Path, help="Directory containing task_N/gold.csv files."
    )
    parser.add_argument(
        "--config-root", required=True, type=Path, help="Frozen per-task config directory."
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="Output evaluation_summary.json path."
    )
    return parser


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run the evaluator command line.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).
        prog: the program name shown in usage messages.

    Returns:
        The exit status: 0 on success, 2 on a usage or fatal error.
    """
    try:
        args = _parser(prog).parse_args(argv)
    except SystemExit as exc:  # usage errors and --help
        return exc.code if isinstance(exc.code, int) else 2
    prediction_root = args.prediction_root.resolve()
    try:
        summary = evaluate_suite(
            prediction_root=prediction_root,
            gold_root=args.gold_root.resolve(),
            config_root=args.config_root.resolve(),
        )
    except FatalError as exc:
        print(f"Evaluator fatal error: {exc}", file=sys.stderr)
        return 2
    output: Path = args.output or prediction_root / "evaluation_summary.json"
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(summary, ensure_ascii=False, indent=2) + "\n"
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"Evaluator fatal error: cannot write summary {output}: {exc}", file=sys.stderr)
        return 2
    console = {key: value for key, value in summary.items() if key != "tasks"}
    print(json.dumps(console, ensure_ascii=False, indent=2))
    print(f"Saved summary to: {output}")
    return 0


__all__ = ["main"]
