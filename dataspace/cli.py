"""The ``dataspace`` command line: parse flags into typed configs, call the library, print.

Every error the library raises on purpose is printed as one line (``error: ...``) with exit
code 2; a run with attempts left unfinished, and a demo whose gold agent scores below 100%,
exit 1. SIGTERM is handled like Ctrl-C: finished attempts are kept, exit code 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataspace.cliargs import POSITIVE_INT
from dataspace.errors import DataSpaceError

logger = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dataspace`` command."""
    from dataspace.cli_run import EXIT_BAD_INPUT, EXIT_INCOMPLETE
    from dataspace.errors import InfrastructureError

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


def _main(argv: list[str]) -> int:
    verbose = False
    while argv and argv[0] in _GLOBAL_FLAGS and len(argv) > 1 and argv[1] in _PASSTHROUGH:
        verbose, argv = True, argv[1:]
    if argv and argv[0] in _PASSTHROUGH:
        # These subcommands own their flags (``eval`` is the official evaluator's CLI);
        # those with no -v of their own take the global one after their name too.
        if argv[0] in _TAKE_GLOBAL_FLAGS and any(a in _GLOBAL_FLAGS for a in argv[1:]):
            verbose = True
            argv = [argv[0], *(a for a in argv[1:] if a not in _GLOBAL_FLAGS)]
        logging.basicConfig(
            level=logging.DEBUG if verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        try:
            return int(_PASSTHROUGH[argv[0]](argv[1:]))
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
    from dataspace.cli_run import EXIT_CODES_HELP

    p = argparse.ArgumentParser(
        prog="dataspace",
        description=_DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(*_GLOBAL_FLAGS, action="store_true", help="debug logging")
    p.add_argument("--version", action="version", version=f"dataspace {_version()}")
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    d = sub.add_parser("demo", help="build the bundled mini benchmark, run gold, score, report")
    d.add_argument("--out", default="demo-out", help="output folder (default: ./demo-out)")
    from dataspace.runs.spec import RunSpec

    d.add_argument(
        "--concurrency",
        type=POSITIVE_INT,
        help=f"attempts at once (default {RunSpec.concurrency}, a run spec's)",
    )
    d.add_argument(
        "--build-cache",
        help="the build's item cache, reused across demo folders (default: OUT/.build-cache)",
    )
    d.add_argument(
        "--backend",
        help="the attempts' sandbox backend (default local; docker runs each in a container)",
    )
    d.set_defaults(func=_cmd_demo)

    r = sub.add_parser(
        "run",
        help="run (or resume) a run spec",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("spec", help="run spec (YAML or JSON)")
    r.add_argument("--concurrency", type=POSITIVE_INT, help="override the spec's concurrency")
    r.add_argument(
        "--retry",
        action="append",
        default=[],
        metavar="MARK",
        help="also rerun the finished attempts so marked (endpoint_unreachable: an outage "
        "of the model endpoint ended them); the earlier try is kept under tries/",
    )
    r.add_argument(
        "--release-cache",
        help="where a release given as a store URI is synced (default: $DATASPACE_RELEASE_CACHE "
        "or ~/.cache/dataspace/releases)",
    )
    r.set_defaults(func=_cmd_run)

    from dataspace.cli_doctor import add_commands

    add_commands(sub)
    _add_plan(sub)

    v = sub.add_parser("validate", help="check a release folder (tasks, configs, gold)")
    v.add_argument("release", help="release: a folder or store URI (file://..., s3://...)")
    v.add_argument("--require-gold", action="store_true")
    v.add_argument(
        "--release-cache",
        help="where a release given as a store URI is synced (default: $DATASPACE_RELEASE_CACHE "
        "or ~/.cache/dataspace/releases)",
    )
    v.set_defaults(func=_cmd_validate)

    x = sub.add_parser("export", help="write a run's submission bundle (one agent)")
    x.add_argument("run", help="run folder: a path or store URI (file://..., s3://...)")
    x.add_argument("--agent", required=True, help="the agent (name in the run spec)")
    x.add_argument("--out", required=True, help="bundle folder to create")
    x.add_argument("--attempt", type=POSITIVE_INT, default=1, help="which attempt (default 1)")
    x.set_defaults(func=_cmd_export)

    for name, text in (
        ("eval", "the official evaluator's command line (same flags)"),
        ("report", "report of one or several runs"),
        ("rescore", "score a run's stored predictions again (no model calls)"),
        ("build", "build a release from Text-to-SQL sources"),
        ("review", "expert review server: init, user, assign, serve, status, stats, export"),
        ("audit", "propose and confirm root causes of failed attempts"),
        ("diff", "which tasks two releases add, remove or change"),
    ):
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


# ---- commands ------------------------------------------------------------------------------


def _cmd_validate(args: argparse.Namespace) -> int:
    from dataspace.release import Release
    from dataspace.runs.resolve import default_release_cache, local_release

    # a store URI (s3://...) is synced into the release cache first, as `run` does
    root = local_release(args.release, cache=args.release_cache or default_release_cache())
    rel = Release(root)
    counts = rel.check(require_gold=args.require_gold)
    where = f"{args.release} (synced to {rel.root})" if "://" in args.release else rel.root
    print(f"{where}: {len(counts.tasks)} tasks, all valid; {counts.describe()}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from dataspace.runs.export import export_bundle

    bundle = export_bundle(args.run, agent=args.agent, out=Path(args.out), attempt=args.attempt)
    for line in bundle.describe():
        print(line)
    return 0


def _eval_main(argv: list[str]) -> int:
    from evaluator.cli import main as eval_main

    return eval_main(argv, prog="dataspace eval")


def _report_main(argv: list[str]) -> int:
    from dataspace.report import report_main

    return int(report_main(argv))


def _rescore_main(argv: list[str]) -> int:
    from dataspace.rescore import rescore_main

    return int(rescore_main(argv))


def _build_main(argv: list[str]) -> int:
    from builder.cli import main as build_main

    return int(build_main(argv))


def _review_main(argv: list[str]) -> int:
    from builder.review.cli import main as review_main

    return review_main(argv)


def _audit_main(argv: list[str]) -> int:
    from dataspace.audit.cli import main as audit_main

    return audit_main(argv)


_TAKE_GLOBAL_FLAGS = frozenset({"report", "rescore", "review", "audit", "diff"})
_PASSTHROUGH: dict[str, Callable[[list[str]], int]] = {
    "eval": _eval_main,
    "report": _report_main,
    "rescore": _rescore_main,
    "build": _build_main,
    "review": _review_main,
    "audit": _audit_main,
    "diff": lambda argv: __import__("dataspace.diff", fromlist=["main"]).main(argv),
}


def _cmd_run(args: argparse.Namespace) -> int:
    import time

    from dataspace.cli_run import exit_code, live_status, print_outcome
    from dataspace.runs.controller import execute_run
    from dataspace.runs.resolve import Overrides, resolve_spec
    from dataspace.runs.spec import load_spec

    t0 = time.monotonic()
    spec = resolve_spec(
        load_spec(args.spec),
        Overrides(concurrency=args.concurrency),
        release_cache=args.release_cache,
    )
    with live_status(f"run {spec.run_id}") as progress:
        outcome = execute_run(spec, progress=progress, retry=_retry_marks(args.retry))
    print_outcome(outcome, started=t0)
    return exit_code(outcome)


def _retry_marks(values: list[str]) -> tuple[str, ...]:
    """``--retry a --retry b,c`` -> ``("a", "b", "c")``."""
    return tuple(m.strip() for v in values for m in v.split(",") if m.strip())


def _add_plan(sub: Any) -> None:
    pl = sub.add_parser(
        "plan",
        help="estimate a run's attempts, model calls, tokens, cost and wall time",
        description="What the run of SPEC will use, per agent and in total, with a range: "
        "from earlier runs of the same model and harness in the spec's store, else from the "
        "paper's per-backbone figures. With earlier runs of two agents, also the tasks x "
        "attempts needed to tell them apart.",
    )
    pl.add_argument("spec", help="run spec (YAML or JSON)")
    pl.add_argument("--level", type=float, default=0.95, help="level of the ranges (default 0.95)")
    pl.add_argument(
        "--difference",
        type=float,
        help="the accuracy difference (points) the sample sizes are for "
        "(default: each pair's observed difference)",
    )
    pl.set_defaults(func=_cmd_plan)


def _cmd_plan(args: argparse.Namespace) -> int:
    from dataspace.errors import ConfigError
    from dataspace.runs.controller import pending_attempts
    from dataspace.runs.plan import estimate_run
    from dataspace.runs.spec import load_spec

    if not 0.0 < args.level < 1.0:
        raise ConfigError(f"--level {args.level}: give a level between 0 and 1, e.g. 0.95")
    if args.difference is not None and not 0.0 < args.difference < 100.0:
        raise ConfigError(f"--difference {args.difference}: give points between 0 and 100")
    spec = load_spec(args.spec)
    est = estimate_run(
        spec,
        pending_attempts(spec),
        level=args.level,
        difference=args.difference / 100.0 if args.difference else None,
    )
    for line in est.lines():
        print(line)
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dataspace")
    except PackageNotFoundError:
        return "unknown"


def _cmd_demo(args: argparse.Namespace) -> int:
    import time

    from dataspace.cli_run import live_status, print_outcome
    from dataspace.demo import run_demo

    t0 = time.monotonic()
    with live_status("run demo") as progress:

        def build_progress(done: int, total: int, _result: Any) -> None:
            progress({"event": "build", "done": done, "total": total})

        outcome = run_demo(
            Path(args.out),
            concurrency=args.concurrency,
            progress=progress,
            build_progress=build_progress,
            build_cache=args.build_cache,
            backend=args.backend,
        )
    rep = outcome.build_report
    print(
        f"built {len(rep.accepted)} tasks into {outcome.release_dir} "
        f"({len(rep.rejected)} items rejected; see "
        f"{outcome.release_dir.parent / 'build_report.json'}) in {outcome.build_seconds:.1f} s"
    )
    print_outcome(outcome.run)
    print(f"total demo time {time.monotonic() - t0:.1f} s")
    if not outcome.ok:
        print(
            f"DEMO FAILED: the gold oracle did not pass {len(outcome.failures)} of "
            f"{len(outcome.run.rows)} attempts; the oracle must score 100%, so this is a "
            "bug. Failing attempts:",
            file=sys.stderr,
        )
        for r in outcome.failures[:20]:
            print(
                f"  {r['task_id']}: status={r['status']} error_code={r.get('error_code')} "
                f"error={r.get('error')}",
                file=sys.stderr,
            )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
