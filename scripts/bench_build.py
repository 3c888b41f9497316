"""Benchmark: builder throughput with every stage, and where the time goes per stage.

    .venv/bin/python scripts/bench_build.py --corpus bundled [--repeat 3] [--workers 0]
    .venv/bin/python scripts/bench_build.py --corpus mimic \\
        --sources ../shared/sources/ehrsql_mimic3_demo [--limit N] [--repeat 3]

``bundled`` is the demo release's spec (both bundled corpora, every stage); ``mimic`` is
EHRSQL's MIMIC-III demo valid split (``ehrsql_mimic3_demo.jsonl`` under ``--sources``),
every stage. Each run builds from an empty item cache (every item really built, the
translated databases made again). ``--workers 0`` builds in this process, ``N`` on a local
Ray with N workers.

Per run it prints the items, wall and CPU seconds and the load average; then the medians
over the runs: items per minute by wall clock, items per minute on 2 cores by CPU (120 /
CPU seconds per item: what 2 otherwise idle cores would do), and a per-stage table (CPU
and wall seconds, summed and per item, child processes such as ffmpeg included in CPU).
Wall figures move with the machine's load; CPU figures much less. ``--profile FILE``
writes a cProfile (CPU time) of the first run and prints its costliest functions;
``--digest FILE`` writes the SHA-256 of every file of the last release (``release.json``
without its ``code_version``), for byte-identity checks across code versions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SOURCES = REPO.parent / "shared" / "sources" / "ehrsql_mimic3_demo"


def make_spec(args: argparse.Namespace) -> Any:
    import dataclasses

    from builder.driver import bundled_spec
    from builder.spec import BuildSpec, SourceSpec

    if args.corpus == "bundled":
        spec = bundled_spec(seed=args.seed)
        if args.limit:
            spec = dataclasses.replace(
                spec,
                sources=tuple(dataclasses.replace(s, limit=args.limit) for s in spec.sources),
            )
    else:
        path = Path(args.sources) / "ehrsql_mimic3_demo.jsonl"
        if not path.is_file():
            raise SystemExit(f"{path}: no such file (pass --sources, the folder that holds it)")
        spec = BuildSpec(
            sources=(SourceSpec(kind="ehrsql-jsonl", path=str(path), limit=args.limit),),
            seed=args.seed,
        )
    return dataclasses.replace(spec, stage3=None) if args.no_stage3 else spec


def release_digests(release: Path) -> dict[str, str]:
    """SHA-256 per file of a release (``release.json`` without the code version)."""
    out = {}
    for path in sorted(release.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.name == "release.json" and path.parent == release:
            body = json.loads(data)
            body.get("builder", {}).pop("code_version", None)
            data = json.dumps(body, sort_keys=True).encode()
        out[path.relative_to(release).as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def one_run(spec: Any, out: Path, workers: int, profile: str | None) -> dict[str, Any]:
    from builder.driver import build_release
    from builder.stages import cpu_seconds

    by_key: dict[str, dict[str, Any]] = {}

    def progress(_done: int, _total: int, res: Any) -> None:
        # a kept video's encoding reports the item again, its first pass included
        if res.get("status") != "cached":
            by_key[res["key"]] = dict(res)

    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile(time.process_time)
    wall, cpu = time.perf_counter(), cpu_seconds()
    if prof is not None:
        prof.enable()
    report = build_release(
        spec, out / "release", workers=workers, cache_dir=out / "cache", progress=progress
    )
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    items = list(by_key.values())
    if workers > 0:  # the items' CPU was spent in the Ray workers
        cpu += sum(float(r.get("cpu_seconds") or 0.0) for r in items)
    return {
        "items": len(report.accepted) + len(report.rejected),
        "builds": len(items),
        "encoded": sum(1 for r in items if r.get("finished_video")),
        "accepted": len(report.accepted),
        "wall": wall,
        "cpu": cpu,
        "load": os.getloadavg(),
        "stage_cpu": _sum(r.get("cpu") for r in items),
        "stage_wall": _sum(
            {k: v for k, v in (r.get("timings") or {}).items() if "." not in k} for r in items
        ),
        "inside": _sum(_inside(r.get("timings") or {}) for r in items),
        "rejected_cpu": sum(
            float(r.get("cpu_seconds") or 0.0) for r in items if r.get("status") != "accepted"
        ),
        "rejected_wall": sum(
            float(r.get("seconds") or 0.0) for r in items if r.get("status") != "accepted"
        ),
        "write": report.timings.get("write", 0.0),
    }


def _inside(timings: dict[str, float]) -> dict[str, float]:
    """Sub-steps of the stages (wall), documents summed over tables by renderer."""
    out: dict[str, float] = {}
    for key, secs in timings.items():
        if "." not in key or key.endswith("total_s"):
            continue
        if key.startswith("stage3.workspace.documents."):
            renderer, _, step = key.rsplit("/", 1)[-1].partition(".")
            key = f"documents.{renderer}.{step}"
        out[key] = out.get(key, 0.0) + float(secs)
    return out


def _sum(rows: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        for k, v in (row or {}).items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("bundled", "mimic"), default="bundled")
    parser.add_argument("--sources", default=str(SOURCES), help="folder of the MIMIC items")
    parser.add_argument("--limit", type=int, help="only the first N items of each source")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0, help="Ray workers (0: in process)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-stage3", action="store_true", help="structured renderers only")
    parser.add_argument("--profile", help="write a cProfile of the first run to this file")
    parser.add_argument("--digest", help="write the last release's file digests (JSON) here")
    args = parser.parse_args()

    from builder.spec import load_items

    spec = make_spec(args)
    started = time.perf_counter()
    loaded, *_ = load_items(spec)
    print(
        f"{args.corpus}: {len(loaded)} items; first load {time.perf_counter() - started:.1f}s "
        f"(not timed below); workers {args.workers}"
    )
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        for n in range(args.repeat):
            run = one_run(
                spec, Path(tmp) / f"run{n}", args.workers, args.profile if n == 0 else None
            )
            runs.append(run)
            print(
                f"run {n + 1}: {run['items']} items ({run['accepted']} tasks; "
                f"{run['builds']} item builds with the video share's rebuilds, "
                f"{run['encoded']} videos encoded after the share was chosen) in "
                f"{run['wall']:.1f}s wall, {run['cpu']:.1f}s CPU = "
                f"{60 * run['items'] / run['wall']:.1f} items/min wall, "
                f"{120 * run['items'] / run['cpu']:.1f} items/min on 2 cores by CPU; "
                f"load average {run['load'][0]:.1f} {run['load'][1]:.1f} {run['load'][2]:.1f}",
                flush=True,
            )
        if args.digest:
            digests = release_digests(Path(tmp) / f"run{args.repeat - 1}" / "release")
            Path(args.digest).write_text(json.dumps(digests, indent=1, sort_keys=True))
            whole = hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()
            print(f"release digest: {whole} ({len(digests)} files) -> {args.digest}")
    _summary(runs)
    if args.profile:
        import pstats

        print(f"\ncostliest functions of run 1 by own CPU time ({args.profile}):")
        pstats.Stats(args.profile).sort_stats("tottime").print_stats(25)


def _summary(runs: list[dict[str, Any]]) -> None:
    med = statistics.median
    n = runs[0]["items"] or 1
    print(
        f"\nmedian of {len(runs)} runs: {med(60 * r['items'] / r['wall'] for r in runs):.1f} "
        f"items/min wall, {med(120 * r['items'] / r['cpu'] for r in runs):.1f} items/min "
        f"on 2 cores by CPU ({med(r['cpu'] for r in runs) / n:.2f} CPU s per item); "
        f"load average at the ends of the runs: " + ", ".join(f"{r['load'][0]:.1f}" for r in runs)
    )
    stages = list(dict.fromkeys(k for r in runs for k in r["stage_cpu"]))
    rows = [
        (
            s,
            med(r["stage_cpu"].get(s, 0.0) for r in runs),
            med(r["stage_wall"].get(s, 0.0) for r in runs),
        )
        for s in stages
    ]
    rows.append(
        (
            "(rejected items)",
            med(r["rejected_cpu"] for r in runs),
            med(r["rejected_wall"] for r in runs),
        )
    )
    rows.append(("(write release)", float("nan"), med(r["write"] for r in runs)))
    total_cpu = med(r["cpu"] for r in runs)
    print(f"\n{'stage':<18}{'CPU s':>9}{'per item':>10}{'share':>8}{'wall s':>9}{'per item':>10}")
    for name, cpu, wall in rows:
        share = f"{100 * cpu / total_cpu:7.1f}%" if cpu == cpu else "        "
        cpu_s = f"{cpu:9.1f}{cpu / n:10.3f}" if cpu == cpu else f"{'':9}{'':10}"
        print(f"{name:<18}{cpu_s}{share}{wall:9.1f}{wall / n:10.3f}")
    inside = sorted({k for r in runs for k in r["inside"]})
    print(
        f"{'(whole build)':<18}{total_cpu:9.1f}{total_cpu / n:10.3f}{'':8}"
        f"{med(r['wall'] for r in runs):9.1f}{med(r['wall'] for r in runs) / n:10.3f}"
    )

    print("\ninside the stages (wall s, summed over items):")
    for key in inside:
        print(f"  {key:<34}{med(r['inside'].get(key, 0.0) for r in runs):9.1f}")


if __name__ == "__main__":
    main()
