"""The ``dataspace`` command: global flags, the subcommands, errors and exit codes.

Every error the library raises on purpose is printed as one line (``error: ...``) with exit
code 2; a run with attempts left unfinished, and a demo whose gold agent scores below 100%,
exit 1. SIGTERM is handled like Ctrl-C: finished attempts are kept, exit code 1.

Two kinds of subcommand: most register their flags on this parser (``add_parser``) and run
with the parsed namespace; those in ``_PASSTHROUGH`` own their whole command line
(``main(argv)``), as ``eval``, the official evaluator's CLI, must.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

from dataspace.cli import (
    audit,
    build,
    convert,
    demo,
    diff,
    doctor,
    evaluate,
    export,
    harnesses,
    plan,
    report,
    rescore,
    review,
    run,
    validate,
)
from dataspace.cli.screen import EXIT_BAD_INPUT, EXIT_CODES_HELP, EXIT_INCOMPLETE
from dataspace.errors import DataSpaceError, InfrastructureError

logger = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dataspace`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _sigterm_as_interrupt()
    try:
        return _main(argv)
    except KeyboardInterrupt:
        how = "terminated (SIGTERM)" if _TERMINATED else "interrupted"
        print(
            f"{how}; finished attempts are kept: rerun the same command to resume", file=sys.stderr
        )
        return EXIT_INCOMPLETE
    except InfrastructureError as exc:  # Ray could not start: nothing ran, a rerun resumes
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INCOMPLETE
    except DataSpaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


_TERMINATED: list[int] = []


def _sigterm_as_interrupt() -> None:
    """SIGTERM raises KeyboardInterrupt in the main thread, exactly as Ctrl-C does."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, _frame: object) -> None:
        _TERMINATED.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


_GLOBAL_FLAGS = ("-v", "--verbose")
_DESCRIPTION = """\
DataSpace: build, run and score the DataSpace data-agent benchmark.

Start with `dataspace demo` (builds the bundled mini benchmark and runs the gold oracle),
check a run spec with `dataspace doctor SPEC`, run it with `dataspace run SPEC` (rerun
to resume), then `dataspace report RUN` and `dataspace export RUN`. Global flags (-v)
may be given before or after the command; `dataspace COMMAND --help` describes each."""

# Subcommands parsed here, in the order ``dataspace --help`` lists them.
_PARSED = (demo, run, doctor, convert, harnesses, plan, validate, export)

# Subcommands that own their flags, with the help line shown by ``dataspace --help``.
_PASSTHROUGH: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "eval": (evaluate.main, "the official evaluator's command line (same flags)"),
    "report": (report.main, "report of one or several runs"),
    "rescore": (rescore.main, "score a run's stored predictions again (no model calls)"),
    "build": (build.main, "build a release from Text-to-SQL sources"),
    "review": (
        review.main,
        "expert review server: init, user, assign, serve, status, stats, export",
    ),
    "audit": (audit.main, "propose and confirm root causes of failed attempts"),
    "diff": (diff.main, "which tasks two releases add, remove or change"),
}
# Those with no -v of their own take the global one after their name too.
_TAKE_GLOBAL_FLAGS = frozenset({"report", "rescore", "review", "audit", "diff"})


def _main(argv: list[str]) -> int:
    verbose = False
    while argv and argv[0] in _GLOBAL_FLAGS and len(argv) > 1 and argv[1] in _PASSTHROUGH:
        verbose, argv = True, argv[1:]
    if argv and argv[0] in _PASSTHROUGH:
        if argv[0] in _TAKE_GLOBAL_FLAGS and any(a in _GLOBAL_FLAGS for a in argv[1:]):
            verbose = True
            argv = [argv[0], *(a for a in argv[1:] if a not in _GLOBAL_FLAGS)]
        logging.basicConfig(
            level=logging.DEBUG if verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        try:
            return int(_PASSTHROUGH[argv[0]][0](argv[1:]))
        except DataSpaceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dataspace",
        description=_DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(*_GLOBAL_FLAGS, action="store_true", help="debug logging")
    p.add_argument("--version", action="version", version=f"dataspace {_version()}")
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for command in _PARSED:
        command.add_parser(sub)
    for name, (_main_of, text) in _PASSTHROUGH.items():
        sub.add_parser(name, help=text, add_help=False)
    _global_flags_after_command(sub)
    return p


def _global_flags_after_command(sub: Any) -> None:
    """``dataspace run -v SPEC`` as well as ``dataspace -v run SPEC``.

    Each parsed subcommand accepts the global flags too; their default is left unset so a
    flag given before the command is not reset by the subcommand's parser.
    """
    for name, parser in sub.choices.items():
        if name in _PASSTHROUGH:
            continue
        parser.add_argument(
            *_GLOBAL_FLAGS, action="store_true", default=argparse.SUPPRESS, help="debug logging"
        )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dataspace")
    except PackageNotFoundError:
        return "unknown"


__all__ = ["main"]
