"""``dataspace build``: build a release from Text-to-SQL sources, in parallel over Ray.

Examples::

    dataspace build spec.yaml --out build/release --workers 2
    dataspace build -- --source bundled:finance --source bundled:clinical --out build/demo
    dataspace build -- --source ehrsql-jsonl:items.jsonl --out build/mimic --limit 50

Flags override the spec file; without a spec, ``--source`` gives the sources (after ``--``
when it is the first argument). Rerunning the
same command reuses every finished item from the cache (``--cache``, by default
``.build-cache`` beside the release). The build report (every rejected item with its stage
and reason) is written as ``build_report.json`` beside the release.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dataspace.cli.args import NON_NEGATIVE_INT, POSITIVE_INT, float_range
from dataspace.errors import DataSpaceError

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dataspace build", description=__doc__.splitlines()[0])
    p.add_argument("spec", nargs="?", help="build spec (YAML or JSON)")
    p.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="KIND:PATH",
        help="a source to load (repeatable), e.g. bundled:finance or ehrsql-jsonl:items.jsonl",
    )
    p.add_argument("--out", required=True, help="the release folder to write")
    p.add_argument(
        "--workers",
        type=NON_NEGATIVE_INT,
        default=2,
        help="Ray workers for a local Ray (0: build in this process; default 2)",
    )
    p.add_argument("--ray-address", help="use this Ray cluster instead of a local one")
    p.add_argument("--cache", help="item cache folder (default: .build-cache beside --out)")
    p.add_argument("--replace", action="store_true", help="replace an existing release")
    p.add_argument("--seed", type=NON_NEGATIVE_INT, help="build seed")
    p.add_argument("--limit", type=POSITIVE_INT, help="build only the first N items of each source")
    p.add_argument("--translator", help="translator provider (glossary or llm)")
    p.add_argument("--model", help="model id for the llm translator")
    p.add_argument("--base-url", help="endpoint of the llm translator")
    p.add_argument("--database-language", choices=("auto", "en", "zh"))
    p.add_argument("--question-language", choices=("auto", "source", "en", "zh"))
    p.add_argument(
        "--cross-language-share",
        type=float_range(0.0, 1.0),
        help="share of items whose question language differs from the workspace",
    )
    p.add_argument("--budget", type=POSITIVE_INT, help="soft row budget per table when sampling")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def _build_spec(args: argparse.Namespace) -> Any:
    """The build spec from the spec file and the flags (flags win)."""
    from builder.spec import BuildOverrides, resolve_build_spec

    return resolve_build_spec(
        args.spec,
        BuildOverrides(
            sources=tuple(args.source),
            limit=args.limit,
            seed=args.seed,
            database_language=args.database_language,
            question_language=args.question_language,
            cross_language_share=args.cross_language_share,
            translator=args.translator,
            model=args.model,
            base_url=args.base_url,
            budget=args.budget,
        ),
    )


def main(argv: list[str] | None = None) -> int:
    """Run ``dataspace build``; returns the exit code (0 built, 1 nothing built, 2 error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]  # ``dataspace build -- --source ...`` passes its flags through
    args = _parser().parse_args(argv)
    if args.verbose:
        logging.getLogger("builder").setLevel(logging.DEBUG)
    try:
        return _run(args)
    except DataSpaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    import os

    from builder.driver import build_release

    spec = _build_spec(args)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    with _progress_bar(quiet=args.quiet) as progress:
        report = build_release(
            spec,
            args.out,
            workers=args.workers,
            cache_dir=args.cache,
            replace=args.replace,
            ray_address=args.ray_address,
            progress=progress,
        )
    _print(report)
    return 0 if report.accepted else 1


@contextlib.contextmanager
def _progress_bar(*, quiet: bool) -> Iterator[Callable[[int, int, Any], None] | None]:
    """A progress callback drawing one bar for the build (None with ``--quiet``)."""
    if quiet:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=False,
    ) as bar:
        handle: dict[str, Any] = {}

        def progress(done: int, total: int, _res: Mapping[str, Any]) -> None:
            if "id" not in handle:
                handle["id"] = bar.add_task("build", total=total)
            bar.update(handle["id"], completed=done, total=total)

        yield progress


def _print(report: Any) -> None:
    counts = report.to_json()["counts"]
    print(
        f"built {counts['accepted']} tasks into {report.release} "
        f"({counts['rejected']} rejected, {counts['skipped']} skipped, "
        f"{counts['cached']} from cache) in {report.wall_seconds:.1f} s "
        f"({report.items_per_minute:.0f} items/min, {report.workers} workers)"
    )
    for stage, reasons in sorted(report.rejection_summary().items()):
        for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:5]:
            print(f"  rejected at {stage}: {n} x {reason}")
    video = report.video
    if video:
        median = video["median_seconds"]
        print(
            f"videos: {video['tasks_with_video']} of {video['tasks']} tasks "
            f"({100 * video['share']:.1f}%, asked {100 * video['target_share']:.1f}%), "
            f"median {median if median is not None else '-'} s; {video['made']} of "
            f"{video['tried']} tries made one, {video['dropped_to_meet_share']} built again "
            "without one to meet the share"
        )
        if video["tasks"] and video["share"] + 0.03 < video["target_share"]:
            print(
                "  warning: fewer tasks could get a video than the share asks for "
                "(see the declines below)"
            )
        for strategy, reasons in sorted(video["declined"].items()):
            for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:3]:
                print(f"  {strategy} declined {n} x {reason}")
    print(f"report: {Path(report.release).parent / 'build_report.json'}")


__all__ = ["main"]
