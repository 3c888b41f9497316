"""``dataspace eval``: the official evaluator's command line, flags unchanged."""

from __future__ import annotations


def main(argv: list[str]) -> int:
    """Run ``python -m evaluator`` under the name ``dataspace eval``."""
    from evaluator.cli import main as eval_main

    return int(eval_main(argv, prog="dataspace eval"))


__all__ = ["main"]
