"""Build a release from Text-to-SQL sources and optionally upload it to a store.

``ray job submit ... -- python -m ray_jobs.build --source bundled:finance
--source ehrsql:/data/ehrsql --dest /var/cache/dataspace/releases/v1 --upload s3://bucket/releases/v1``
or ``... -- python -m ray_jobs.build --spec build.yaml --dest ...``

Items are built in parallel on the Ray cluster (``builder.driver.build_release``: stage 1
translation, stage 2 sampling, rendering, content-addressed so a rerun skips finished
items). The release is written to ``--dest`` (a folder; on a cluster, the shared volume)
and, with ``--upload``, copied to the store so later runs can name it by URI.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from dataspace.cli.args import NON_NEGATIVE_INT
from ray_jobs._common import run_main, setup_logging


@dataclass(frozen=True, kw_only=True)
class BuildJobConfig:
    """The build job's flags, resolved."""

    sources: tuple[tuple[str, str], ...]
    dest: str
    spec: str | None = None
    workers: int = 2
    seed: int = 0
    replace: bool = False
    upload: str | None = None
    verbose: bool = False


def parse_args(argv: list[str] | None = None) -> BuildJobConfig:
    """Flags -> ``BuildJobConfig``."""
    p = argparse.ArgumentParser(
        prog="python -m ray_jobs.build", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="KIND:PATH",
        help="a source to load, e.g. bundled:finance or ehrsql:/data/ehrsql",
    )
    p.add_argument("--spec", help="a build spec (YAML or JSON) instead of --source")
    p.add_argument("--dest", required=True, help="the release folder to write")
    p.add_argument(
        "--workers",
        type=NON_NEGATIVE_INT,
        default=2,
        help="parallel builds (local Ray only; 0: in this process)",
    )
    p.add_argument("--seed", type=NON_NEGATIVE_INT, default=0)
    p.add_argument("--replace", action="store_true", help="replace an existing release")
    p.add_argument("--upload", help="also copy the release to this store URI")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    if not a.source and not a.spec:
        p.error("give --spec or at least one --source")
    sources = []
    for text in a.source:
        kind, sep, path = text.partition(":")
        if not sep or not kind or not path:
            p.error(f"--source {text!r}: expected KIND:PATH")
        sources.append((kind, path))
    return BuildJobConfig(
        sources=tuple(sources),
        dest=a.dest,
        spec=a.spec,
        workers=a.workers,
        seed=a.seed,
        replace=a.replace,
        upload=a.upload,
        verbose=a.verbose,
    )


def upload_folder(folder: Path, uri: str) -> int:
    """Copy every file of ``folder`` to the store at ``uri``; returns how many."""
    from dataspace.store import open_store

    store = open_store(uri)
    count = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        store.put_file(path.relative_to(folder).as_posix(), path)
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    cfg = parse_args(argv)
    setup_logging(cfg.verbose)

    def body() -> int:
        import dataclasses
        import os

        from builder.driver import build_release
        from builder.spec import BuildSpec, SourceSpec

        if cfg.spec:
            spec = BuildSpec.load(cfg.spec)
            spec = dataclasses.replace(
                spec,
                sources=spec.sources + tuple(SourceSpec(kind=k, path=p) for k, p in cfg.sources),
            )
        else:
            spec = BuildSpec(sources=tuple(SourceSpec(kind=k, path=p) for k, p in cfg.sources))
        spec = dataclasses.replace(spec, seed=cfg.seed) if cfg.seed else spec
        report = build_release(
            spec,
            cfg.dest,
            workers=cfg.workers,
            replace=cfg.replace,
            ray_address=os.environ.get("RAY_ADDRESS"),
        )
        print(
            f"built {len(report.accepted)} tasks into {cfg.dest}; "
            f"{len(report.rejected)} items rejected"
        )
        for rej in list(report.rejected)[:20]:
            print(f"  rejected {rej.corpus}/{rej.id} at {rej.stage}: {rej.reason}")
        if cfg.upload:
            count = upload_folder(Path(cfg.dest), cfg.upload)
            print(f"uploaded {count} files to {cfg.upload}")
        return 0 if report.accepted else 1

    return run_main(body)


if __name__ == "__main__":
    sys.exit(main())
