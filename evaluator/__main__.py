"""``python -m evaluator``: the official evaluator's command line."""

from evaluator.cli import main

raise SystemExit(main(prog="python -m evaluator"))
