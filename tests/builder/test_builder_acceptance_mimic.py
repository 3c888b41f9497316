"""Real EHRSQL items over the MIMIC-III demo, built with every stage (a subset for CI time).

The full valid split is ``scripts/builder_acceptance.py``; this test builds a handful of
items chosen to cover what a careful solver checks: a quoted entity, a relative date
("this year"), a rank-limited answer with ties, an ordered answer, a Chinese question from
a translated template, a video. It skips when the shared sources are absent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builder.driver import build_release
from builder.semantics import rank_limit
from builder.spec import BuildSpec, LanguagePlan
from builder.transform.question import fluency_problems
from dataspace.diff import diff_releases
from dataspace.release import Release

IDS = (
    "5b4a882e229bcd3e1136d11d",  # what does {abbreviation} stand for?
    "9d5aa7a8947642bfc6f9f710",  # top three diagnoses since 4 years ago (ties)
    "9bbd95caec81795d82a77c57",  # patients admitted this year (fixed now)
    "03849ee05a7094a88f3bb777",  # cost of a lab test named with a quoted value
    "fe7310d50f90b0644365a1b5_demo",  # admission times this year (several rows)
    "b5adb7158d2d1a83114b91e2_demo",  # length of the last hospital stay
)
NOW = "2105-12-31 23:59:00"


def _subset(folder: Path, dest: Path) -> Path:
    rows = [json.loads(line) for line in (folder / "ehrsql_mimic3_demo.jsonl").open()]
    chosen = [r for r in rows if r["id"] in IDS]
    assert len(chosen) == len(IDS)
    dest.write_text("\n".join(json.dumps(r) for r in chosen) + "\n", encoding="utf-8")
    return dest


def _spec(jsonl: Path, db: Path) -> BuildSpec:
    return BuildSpec.from_mapping(
        {
            "seed": 3,
            "sources": [
                {"kind": "ehrsql-jsonl", "path": str(jsonl), "options": {"db_path": str(db)}}
            ],
            "languages": {"database": "en", "question": "zh"},
            "sampling": {"budget": 120},
            "semantics": {"order_share": 1.0},
            "stage3": {
                "video_share": 0.5,
                "video": {"target_seconds": 6.0, "fps": 4, "narration": False},
            },
        }
    )


@pytest.mark.integration
def test_mimic_items_build_into_tasks_a_careful_solver_accepts(mimic_demo, tmp_path, ray_local):
    jsonl = _subset(mimic_demo, tmp_path / "subset.jsonl")
    spec = _spec(jsonl, mimic_demo / "mimic_iii_demo.sqlite")
    assert spec.languages == LanguagePlan(database="en", question="zh")
    a, b = tmp_path / "a" / "release", tmp_path / "b" / "release"
    report = build_release(spec, a, workers=0, cache_dir=tmp_path / "cache-a")
    rel = Release(a)
    rel.check(require_gold=True)
    assert len(report.accepted) >= 5, report.to_json()["rejected"]
    stated_now = ties = 0
    for t in rel.task_ids():
        q = rel.task(t).question
        ledger = rel.ledger(t)
        sql = ledger["sql"]
        focused = ledger["transform"]["question"]["focused_glossary"]
        protected = [e["target"] for e in focused] + re.findall(r"'([^']*)'", sql)
        assert fluency_problems(q, "zh", protected) == [], q
        assert "【" not in q and "（以" not in q and "（排名" not in q, q
        assert ledger["transform"]["question"]["method"] == "template", q
        if f"'{NOW}'" in sql:
            assert "以2105年12月31日23:59为当前时间" in q, q
            stated_now += 1
        n = rank_limit(sql)
        if n is not None and rel.metadata(t)["answer_rows"] > n:
            assert "并列" in q, q
            ties += 1
        assert "timings" not in json.dumps(ledger) and '"seconds"' not in json.dumps(ledger)
        md = rel.metadata(t)
        assert md["modalities_required"] and set(md["modalities_required"]) <= set(
            md["modalities_present"]
        )
        assert md["answer_shape"]["rows"] in ("one", "multiple")
    assert stated_now >= 2
    # The ordered task asks for its order and the config compares rows in order.
    ordered = [t for t in rel.task_ids() if rel.config(t).order_sensitive]
    assert ordered and all("排列" in rel.task(t).question for t in ordered)
    assert all(rel.metadata(t)["answer_rows"] > 1 for t in ordered)
    # The gold agent passes every task through the real run loop and sandboxes.
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    run = execute_run(
        RunSpec(
            run_id="gold",
            release=str(a),
            store=f"file://{tmp_path / 'store'}",
            agents=(AgentSpec(name="gold", harness="gold"),),
            limits=Limits(cpus=1.0, memory_bytes=1024**3),
            sandbox=SandboxConfig(backend="local"),
            concurrency=2,
        )
    )
    assert len(run.rows) == len(rel.task_ids())
    assert all(r.get("passed") is True for r in run.rows), run.rows
    # A second build from an empty cache is byte-identical.
    build_release(spec, b, workers=0, cache_dir=tmp_path / "cache-b")
    d = diff_releases(a, b)
    assert d.identical, d.to_json()
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files_a)
