"""The official evaluator's command line: ``python -m evaluator`` or ``dataspace eval``.

::

    python -m evaluator --prediction-root P --gold-root G --config-root C [--output FILE]
                        [--explain]

Writes the summary to ``FILE`` (default ``P/evaluation_summary.json``), prints it without the
per-task entries, and exits 0; on a fatal error prints one line to stderr and exits 2.

``--explain`` adds an ``explanation`` object to every failed task's entry
(:mod:`evaluator.explain`) and prints each failed task's explanation; the verdicts and
every other key stay exactly as without it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

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
    parser.add_argument(
        "--explain",
        action="store_true",
        help="Explain every failed task (which column or row differs, near misses).",
    )
    return parser


def _explain(
    summary: dict[str, Any], prediction_root: Path, gold_root: Path, config_root: Path
) -> None:
    from evaluator.config import load_configs
    from evaluator.explain import explain_files

    configs = {c.task_id: c for c in load_configs(config_root)}
    for entry in summary["tasks"]:
        if entry["passed"]:
            continue
        task = entry["task_id"]
        entry["explanation"] = explain_files(
            prediction_path=prediction_root / task / "prediction.csv",
            gold_path=gold_root / task / "gold.csv",
            config=configs[task],
            verdict=entry,
        )


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
    if args.explain:
        try:
            _explain(summary, prediction_root, args.gold_root.resolve(), args.config_root.resolve())
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
    if args.explain:
        for entry in summary["tasks"]:
            if "explanation" in entry:
                print(f"{entry['task_id']}: {entry['error_code']}")
                for line in entry["explanation"]["summary"]:
                    print(f"  - {line}")
    print(f"Saved summary to: {output}")
    return 0


__all__ = ["main"]
