"""Build a corpus with every builder stage, twice, and check it against the paper.

    .venv/bin/python scripts/builder_acceptance.py --out /tmp/acceptance [--limit N]
    .venv/bin/python scripts/builder_acceptance.py --corpus bundled --out /tmp/acceptance-b

``--corpus mimic`` (the default) is EHRSQL's MIMIC-III demo valid split; ``bundled`` the
two bundled mini corpora (the demo's release). Checks (each printed with its count; the
exit code is 1 when one fails):
- no Chinese question fails the fluency gate (English words, word order) and none leaks an
  internal placeholder or a bracketed video slot;
- every question has at most one note (no stacked parenthetical notes);
- every task whose SQL uses the fixed "now" states it in its question;
- no rank-limited task has more gold rows than N unless its question states the tie rule;
- the gold agent scores 100% through the real run loop (local sandboxes);
- a second build, from an empty cache and in its own process (run alongside the first),
  is byte-identical (``dataspace diff`` and bytes).

Then it prints the share of items lost to each gate, the video composition the build
report gives (share asked and reached, median length, each strategy's declines), the
paper's composition figures (Table 2, §5) next to this build's, and writes every Chinese
question to ``OUT/chinese_questions.txt`` for reading.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

SOURCES = Path(__file__).resolve().parents[2] / "shared" / "sources" / "ehrsql_mimic3_demo"

PAPER = {
    "video share (workspaces with a video)": "46.1% (189/410)",
    "median video length": "103.8 s (39.1-158.3 s)",
    "required modality combinations": "13",
    "multimodal share (2+ required modalities)": "32.7% (134/410)",
    "order-sensitive share": "22.4% (92/410)",
    "one / two / three required modalities": "67.3% / 28.0% / 4.6%",
    "video required (Table 12)": "23.7% (97/410)",
    "document required (Table 12)": "32.9% (135/410)",
    "answer rows one / multiple": "43.4% / 56.6% (178/232)",
}


def spec_mapping(
    limit: int | None,
    video_share: float,
    stage3: bool = True,
    corpus: str = "mimic",
    sources_dir: Path = SOURCES,
) -> dict:
    sources: list[dict[str, object]]
    if corpus == "bundled":
        sources = [
            {"kind": "bundled", "path": "finance", "options": {"question_language": "mixed"}},
            {"kind": "bundled", "path": "clinical"},
        ]
    else:
        sources = [{"kind": "ehrsql-jsonl", "path": str(sources_dir / "ehrsql_mimic3_demo.jsonl")}]
    if limit:
        for src in sources:
            src["limit"] = limit
    return {
        "schema_version": "1.0",
        "seed": 0,
        "sources": sources,
        "translator": {"name": "glossary"},
        "sampling": {"budget": 200, "attempts": 3},
        "stage3": {"video_share": video_share} if stage3 else False,
    }


def build(dest: Path, cache: Path, mapping: dict, workers: int) -> dict:
    from builder.driver import build_release
    from builder.spec import BuildSpec

    spec = BuildSpec.from_mapping(mapping)
    report = build_release(spec, dest, workers=workers, cache_dir=cache, replace=True)
    return report.to_json()


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def gold_run(release: Path, store: Path) -> tuple[int, int]:
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    spec = RunSpec(
        run_id="gold-acceptance",
        release=str(release),
        store=f"file://{store}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(cpus=1.0, memory_bytes=1024**3),
        sandbox=SandboxConfig(backend="local"),
        concurrency=2,
    )
    run = execute_run(spec)
    passed = sum(1 for r in run.rows if r.get("passed") is True)
    return passed, len(run.rows)


def check_release(release: Path) -> tuple[dict[str, list[str]], list[str]]:
    """The failed checks by name, and every Chinese question (``task_id<TAB>question``)."""
    import re

    from builder import semantics as sem
    from builder.transform.question import fluency_problems
    from dataspace.release import Release

    rel = Release(release)
    bad: dict[str, list[str]] = {
        "fluency": [],
        "placeholder": [],
        "one note": [],
        "now": [],
        "ties": [],
    }
    chinese = []
    for t in rel.task_ids():
        q = rel.task(t).question
        ledger = rel.ledger(t) or {}
        lang = ledger.get("languages", {}).get("question", "en")
        tr = ledger.get("transform", {})
        focused = tr.get("question", {}).get("focused_glossary", [])
        sql = str(ledger.get("sql", ""))
        source_sql = str((ledger.get("source") or {}).get("sql", ""))
        if lang == "zh":
            chinese.append(f"{t}\t{q}")
        protected = [e.get("target", "") for e in focused] + [e.get("source", "") for e in focused]
        # As the build's own gate: literals and names of the task's and the source's SQL.
        protected += re.findall(r"'((?:[^']|'')*)'", f"{sql} {source_sql}")
        for a, b in re.findall(r"\b(\w+)\.(\w+)\b", f"{sql} {source_sql}"):
            protected += [a, b]
        problems = fluency_problems(q, lang, protected)
        for p in problems:
            (bad["placeholder"] if "placeholder" in p or "slot" in p else bad["fluency"]).append(
                f"{t}: {p}: {q}"
            )
        if re.search(r"（(?:以|排名|结果|所需)|\((?:Take|Ties|List|The records)", q):
            bad["one note"].append(f"{t}: {q}")
        stamp = sem.pinned_now(sql)
        if stamp and not sem.states(q, sem.now_clause(stamp, lang)):
            bad["now"].append(f"{t}: {q}")
        n = sem.rank_limit(sql)
        rows = (rel.metadata(t) or {}).get("answer_rows", 0)
        tie = sem.tie_clause(n, lang, dense=sem.dense_ranks(sql)) if n is not None else ""
        if n is not None and rows > n and not sem.states(q, tie):
            bad["ties"].append(f"{t}: top-{n} with {rows} rows: {q}")
    return bad, chinese


def composition(release: Path) -> dict[str, str]:
    from dataspace.release import Release

    rel = Release(release)
    ids = rel.task_ids()
    mds = [rel.metadata(t) or {} for t in ids]
    cfgs = [json.loads(rel.config_path(t).read_text(encoding="utf-8")) for t in ids]
    n = len(ids)
    video = [m for m in mds if m.get("video")]
    lengths = [float(m["video"]["seconds"]) for m in video]
    combos = Counter(tuple(m.get("modalities_required", [])) for m in mds)
    sizes = Counter(len(m.get("modalities_required", [])) for m in mds)
    ordered = sum(1 for c in cfgs if c.get("order_sensitive"))
    multi_rows = sum(1 for m in mds if m.get("answer_rows", 0) > 1)

    def pct(k: int) -> str:
        return f"{100 * k / n:.1f}% ({k}/{n})" if n else "n/a"

    return {
        "video share (workspaces with a video)": pct(len(video)),
        "median video length": (
            f"{statistics.median(lengths):.1f} s ({min(lengths):.1f}-{max(lengths):.1f} s)"
            if lengths
            else "no videos"
        ),
        "required modality combinations": f"{len(combos)}: "
        + ", ".join(f"{'+'.join(k) or '-'} {v}" for k, v in combos.most_common()),
        "multimodal share (2+ required modalities)": pct(
            sum(v for k, v in sizes.items() if k >= 2)
        ),
        "order-sensitive share": pct(ordered),
        "one / two / three required modalities": " / ".join(
            f"{100 * sizes.get(k, 0) / n:.1f}%" for k in (1, 2, 3)
        ),
        "video required (Table 12)": pct(
            sum(1 for m in mds if "video" in m.get("modalities_required", []))
        ),
        "document required (Table 12)": pct(
            sum(1 for m in mds if {"markdown", "pdf"} & set(m.get("modalities_required", [])))
        ),
        "answer rows one / multiple": f"{100 * (n - multi_rows) / n:.1f}% / "
        f"{100 * multi_rows / n:.1f}% ({n - multi_rows}/{multi_rows})",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--corpus", choices=("mimic", "bundled"), default="mimic")
    ap.add_argument(
        "--sources", type=Path, default=SOURCES, help="the EHRSQL MIMIC-III demo directory"
    )
    ap.add_argument("--limit", type=int, default=None, help="first N items only")
    ap.add_argument("--video-share", type=float, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-second", action="store_true", help="one build only")
    ap.add_argument("--skip-gold", action="store_true", help="no gold-agent run")
    ap.add_argument(
        "--no-stage3", action="store_true", help="stages 1-2 only (structured renderers)"
    )
    args = ap.parse_args()
    if args.corpus == "mimic" and not args.sources.is_dir():
        print(f"sources absent: {args.sources} (pass --sources DIR)", file=sys.stderr)
        return 2
    from builder.spec import Stage3Options

    share = args.video_share if args.video_share is not None else Stage3Options().video_share
    mapping = spec_mapping(
        args.limit, share, stage3=not args.no_stage3, corpus=args.corpus, sources_dir=args.sources
    )
    out = args.out.resolve()
    a, b = out / "a" / "release", out / "b" / "release"
    second = pool = None
    if not args.skip_second:
        # Build B at the same time, in its own process and cache, from the same spec.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        second = pool.submit(build, b, out / "b" / "cache", mapping, args.workers)
    rep = build(a, out / "a" / "cache", mapping, args.workers)
    failed = False
    total = rep["counts"]["accepted"] + rep["counts"]["rejected"]
    print(f"build A: {rep['counts']} in {rep['wall_seconds']} s")
    print("\nitems lost per gate (share of all loaded items):")
    by_stage = Counter(r["stage"] for r in rep["rejected"])
    for stage, lost in by_stage.most_common():
        print(f"  {stage:14s} {lost:4d}  {100 * lost / total:5.1f}%")
        for reason, c in sorted(rep["rejections_by_stage"][stage].items(), key=lambda x: -x[1])[:6]:
            print(f"      {c:3d}  {reason[:150]}")
    print(
        f"  accepted       {rep['counts']['accepted']:4d}  "
        f"{100 * rep['counts']['accepted'] / total:5.1f}%"
    )
    video = rep.get("video")
    if video:
        print(
            f"\nvideos: {video['tasks_with_video']} of {video['tasks']} tasks "
            f"({100 * video['share']:.1f}%; asked {100 * video['target_share']:.1f}%), median "
            f"{video['median_seconds']} s; {video['made']} of {video['tried']} tries made one, "
            f"{video['dropped_to_meet_share']} built again without one to meet the share"
        )
        for strategy, reasons in sorted(video["declined"].items()):
            for reason, c in sorted(reasons.items(), key=lambda x: -x[1])[:4]:
                print(f"      {strategy} declined {c:3d} x {reason[:120]}")
    bad, chinese = check_release(a)
    (out / "chinese_questions.txt").write_text("\n".join(chinese) + "\n", encoding="utf-8")
    print(f"\n{len(chinese)} Chinese questions written to {out / 'chinese_questions.txt'}")
    print("\nchecks:")
    for check, problems in bad.items():
        print(f"  {check:12s} {'ok' if not problems else f'{len(problems)} FAILED'}")
        for x in problems[:5]:
            print(f"      {x[:220]}")
        failed |= bool(problems)
    if not args.skip_gold:
        passed, attempts = gold_run(a, out / "store")
        print(f"  gold agent   {passed}/{attempts} passed ({100 * passed / max(attempts, 1):.1f}%)")
        failed |= passed != attempts
    if not args.skip_second:
        from dataspace.diff import diff_releases, format_diff

        assert second is not None and pool is not None
        rep_b = second.result()
        pool.shutdown()
        d = diff_releases(a, b)
        same = tree_digest(a) == tree_digest(b)
        print(
            f"  rebuild      {'byte-identical' if same and d.identical else 'DIFFERENT'} "
            f"(B: {rep_b['counts']['accepted']} tasks)"
        )
        if not (same and d.identical):
            print("\n".join("      " + line for line in format_diff(d)))
        failed |= not (same and d.identical)
    comp = composition(a)
    print("\ncomposition: paper (Table 2, §5) vs this build")
    print("| figure | paper | this build |\n|---|---|---|")
    for figure, paper in PAPER.items():
        print(f"| {figure} | {paper} | {comp[figure]} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
