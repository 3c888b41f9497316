"""The ``dataspace`` command line: parse flags into typed configs, call the library, print.

Every error the library raises on purpose is printed as one line (``error: ...``) with exit
code 2; a demo whose gold agent scores below 100% exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dataspace.errors import DataSpaceError

logger = logging.getLogger(__name__)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``dataspace`` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _PASSTHROUGH:
        # These subcommands own their flags (``eval`` is the official evaluator's CLI).
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
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
    try:
        return int(args.func(args) or 0)
    except DataSpaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dataspace", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command")

    d = sub.add_parser("demo", help="build the bundled mini benchmark, run gold, score, report")
    d.add_argument("--out", default="demo-out", help="output folder (default: ./demo-out)")
    d.add_argument("--concurrency", type=int, default=2, help="attempts at once (default 2)")
    d.set_defaults(func=_cmd_demo)

    r = sub.add_parser("run", help="run (or resume) a run spec")
    r.add_argument("spec", help="run spec (YAML or JSON)")
    r.add_argument("--concurrency", type=int, help="override the spec's concurrency")
    r.set_defaults(func=_cmd_run)

    v = sub.add_parser("validate", help="check a release folder (tasks, configs, gold)")
    v.add_argument("release")
    v.add_argument("--require-gold", action="store_true")
    v.set_defaults(func=_cmd_validate)

    x = sub.add_parser("export", help="write a run's submission bundle (one agent)")
    x.add_argument("run", help="run folder: a path or store URI (file://..., s3://...)")
    x.add_argument("--agent", required=True, help="the agent (name in the run spec)")
    x.add_argument("--out", required=True, help="bundle folder to create")
    x.add_argument("--attempt", type=int, default=1, help="which attempt (default 1)")
    x.set_defaults(func=_cmd_export)

    for name, text in (
        ("eval", "the official evaluator's command line (same flags)"),
        ("report", "report of one or several runs"),
        ("build", "build a release from Text-to-SQL sources"),
    ):
        sub.add_parser(name, help=text, add_help=False)
    return p


# ---- commands ------------------------------------------------------------------------------


def _cmd_validate(args: argparse.Namespace) -> int:
    from dataspace.release import Release

    rel = Release(args.release)
    counts = rel.check(require_gold=args.require_gold)
    print(f"{rel.root}: {len(counts.tasks)} tasks, all valid; {counts.describe()}")
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


def _build_main(argv: list[str]) -> int:
    from builder.cli import main as build_main

    return int(build_main(argv))


_PASSTHROUGH: dict[str, Callable[[list[str]], int]] = {
    "eval": _eval_main,
    "report": _report_main,
    "build": _build_main,
}


def _cmd_run(args: argparse.Namespace) -> int:
    import dataclasses

    from dataspace.runs.spec import load_spec

    spec = load_spec(args.spec)
    if args.concurrency:
        spec = dataclasses.replace(spec, concurrency=args.concurrency)
    outcome = _execute_with_progress(spec)
    _print_outcome(outcome)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    import time

    from dataspace.demo import run_demo

    t0 = time.monotonic()
    with _progress_bar("run demo") as progress:

        def build_progress(done: int, total: int, _result: Any) -> None:
            progress({"event": "build", "done": done, "total": total})

        outcome = run_demo(
            Path(args.out),
            concurrency=args.concurrency,
            progress=progress,
            build_progress=build_progress,
        )
    rep = outcome.build_report
    print(
        f"built {len(rep.accepted)} tasks into {outcome.release_dir} "
        f"({len(rep.rejected)} items rejected; see "
        f"{outcome.release_dir.parent / 'build_report.json'}) in {outcome.build_seconds:.1f} s"
    )
    _print_outcome(outcome.run)
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


# ---- helpers ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _progress_bar(label: str) -> Iterator[Callable[[dict[str, Any]], None]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    ) as bar:
        handle: dict[str, Any] = {}

        def progress(ev: dict[str, Any]) -> None:
            if ev.get("event") == "build":
                if "build" not in handle:
                    handle["build"] = bar.add_task("build release", total=ev["total"])
                bar.update(handle["build"], completed=ev["done"], total=ev["total"])
            elif ev.get("event") == "plan":
                handle["id"] = bar.add_task(label, total=ev["total"], completed=ev["done"])
            elif "id" in handle:
                bar.advance(handle["id"])

        yield progress


def _execute_with_progress(spec: Any) -> Any:
    from dataspace.runs.controller import execute_run

    with _progress_bar(f"run {spec.run_id}") as progress:
        return execute_run(spec, progress=progress)


def _print_outcome(outcome: Any) -> None:
    from dataspace.report import write_basic_report
    from dataspace.runs.layout import RunLayout
    from dataspace.store import open_store

    store = open_store(outcome.store_uri)
    layout = RunLayout(run_id=outcome.run_id)
    paths = write_basic_report(store, layout.prefix, outcome.summary)
    print(
        f"attempts: {len(outcome.rows)} ({outcome.executed} run now, {outcome.skipped} "
        f"already finished); infrastructure faults retried: {len(outcome.infra_failures)}"
    )
    if "tasks" in outcome.summary:
        from dataspace.release import describe_counts

        s = outcome.summary
        n_skip = sum(1 for r in outcome.rows if r["status"] == "skipped")
        skip = f"; {n_skip} oracle attempts skipped (no gold to submit)" if n_skip else ""
        print(f"tasks: {describe_counts(s['scored_tasks'], s['tasks'])}{skip}")
    for name, a in outcome.summary["agents"].items():
        acc = "-" if a["accuracy"] is None else f"{100 * a['accuracy']:.2f}%"
        print(
            f"  {name}: accuracy {acc} ({a['passed']}/{a['scored']}), statuses {a['status_counts']}"
        )
    print(f"results: {store.url_for(layout.key('results.parquet'))}")
    for p in paths:
        print(f"report:  {p}")


if __name__ == "__main__":
    sys.exit(main())
