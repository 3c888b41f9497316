"""Stage 3 on whole releases: the bundled corpora and the EHRSQL MIMIC-III demo source.

Each release is built by the one driver (``builder.driver.build_release``) with routing over
every modality, documents and videos; ``stage3.forced`` makes chosen items get a video with
a chosen strategy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builder.documents.coverage import DocumentManifest, read_document
from builder.documents.validators import split_paragraphs
from builder.driver import build_release
from builder.gold import gold_from_ledger
from builder.render.pdf import pdf_paragraphs
from dataspace.release import Release
from tests.builder.conftest import MIMIC, plain_spec

VIDEO = {"scene_seconds": 0.5, "fps": 4, "narration": False, "target_seconds": 0.0}


def build_stage3(items, dest: Path, *, force: dict[str, str], video_share: float = 0.0) -> Release:
    """Build items into a release with stage 3 on (``force``: item id -> strategy)."""
    spec = plain_spec(stage3={"video": VIDEO, "video_share": video_share, "forced": force})
    build_release(spec, dest, items=items, cache_dir=dest.parent / "cache")
    return Release(dest)


def _check_release(release: Release) -> list[dict]:
    """Gold re-derives from every ledger; every document's cells read back from the files."""
    import evaluator

    release.check(require_gold=True)
    metas = []
    for task_id in release.task_ids():
        gold = release.gold_bytes(task_id)
        assert gold_from_ledger(release.ledger_dir(task_id)).csv == gold
        config = release.config(task_id)
        table = evaluator.read_csv(gold, role="gold")
        assert len(table.header) == len(config.columns)
        meta = release.metadata(task_id)
        ledger = release.ledger(task_id)
        ws = release.workspace(task_id)
        for key, _doc in ledger["stage3"]["workspace"]["documents"].items():
            table_name, renderer = key.split("/")
            manifest = DocumentManifest.from_json(
                json.loads(
                    (
                        release.ledger_dir(task_id)
                        / "documents"
                        / f"{table_name}.{renderer}.manifest.json"
                    ).read_text(encoding="utf-8")
                )
            )
            path = ws / next(
                r["path"]
                for r in ledger["stage3"]["workspace"]["routes"][table_name]
                if r["renderer"] == renderer
            )
            paras = (
                pdf_paragraphs(path.read_bytes())
                if renderer == "pdf"
                else split_paragraphs(path.read_text(encoding="utf-8"))
            )
            reading = read_document(paras, manifest)
            assert not reading.missing and not reading.conflicts and not reading.errors
        for t in meta["tables_withheld"]:
            assert not any(p.stem == t for p in ws.rglob("*") if p.suffix != ".sqlite")
        metas.append(meta | {"question": release.task(task_id).question})
    return metas


def test_bundled_release_has_every_modality_strategy_and_language(bundled_items, tmp_path):
    force = {
        "19": "predicate_abstraction",
        "31": "answer_evidence",
        "0a1388be5658f90d64861c22": "predicate_abstraction",
        "1eb7c49376ca6aade1adc15f": "answer_evidence",
    }
    wanted = {"19", "31", "0a1388be5658f90d64861c22", "1eb7c49376ca6aade1adc15f"}
    finance = [i for i in bundled_items if i.corpus != "clinical"]
    clinical = [i for i in bundled_items if i.corpus == "clinical"]
    items = [i for i in bundled_items if i.id in wanted] + finance[:6] + clinical[:6]
    release = build_stage3(items, tmp_path / "release", force=force)
    metas = _check_release(release)
    required = {m for meta in metas for m in meta["modalities_required"]}
    assert {"markdown", "pdf", "video"} <= required
    strategies = {(m["video"] or {}).get("strategy") for m in metas}
    assert {"predicate_abstraction", "answer_evidence"} <= strategies
    video_langs = {m["workspace_language"] for m in metas if m["video"]}
    assert {"en", "zh"} <= video_langs
    assert {m["question_language"] for m in metas} == {"en", "zh"}
    for meta in metas:
        assert set(meta["modalities_required"]) <= set(meta["modalities_present"])
        if meta["video"]:
            assert (Path(release.workspace(meta["task_id"])) / "briefing.mp4").is_file()


@pytest.mark.sources
@pytest.mark.slow
def test_ehrsql_mimic3_demo_source_build(tmp_path):
    src = MIMIC
    if not src.is_dir():
        pytest.skip(f"{src} is absent (the shared source corpora are not beside the project)")
    from builder.sources.base import load_source

    items = load_source(
        "ehrsql-jsonl", src / "ehrsql_mimic3_demo.jsonl", db_path=src / "mimic_iii_demo.sqlite"
    )
    picked = [i for i in items if re.search(r"patient \d+", i.question)][:3]
    force = {picked[0].id: "predicate_abstraction"}
    release = build_stage3(picked, tmp_path / "mimic", force=force, video_share=0.0)
    metas = _check_release(release)
    assert any(m["video"] for m in metas)
    assert all(m["modalities_present"] for m in metas)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.sandbox
@pytest.mark.ray
def test_gold_agent_scores_everything_on_a_stage3_release(bundled_items, tmp_path, ray_local):
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    force = {"31": "answer_evidence", "0a1388be5658f90d64861c22": "predicate_abstraction"}
    items = [i for i in bundled_items if i.id in force][:2] + list(bundled_items[:4])
    release = build_stage3(items, tmp_path / "release", force=force)
    spec = RunSpec(
        run_id="stage3-gold",
        release=str(release.root),
        store=f"file://{tmp_path / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(cpus=1.0, memory_bytes=1024**3),
        sandbox=SandboxConfig(backend="local"),
        concurrency=2,
    )
    outcome = execute_run(spec)
    gold = outcome.summary["agents"]["gold"]
    assert gold["accuracy"] == 1.0 and gold["scored"] == len(release.task_ids())


def test_prediction_from_gold_csv_passes_the_evaluator(bundled_items, tmp_path):
    """The gold agent's submission (the gold CSV) is accepted by the evaluator for every
    task whose question and workspace stage 3 changed."""
    import evaluator

    force = {"31": "answer_evidence", "19": "predicate_abstraction"}
    items = [i for i in bundled_items if i.id in force]
    release = build_stage3(items, tmp_path / "release", force=force)
    for task_id in release.task_ids():
        pred = tmp_path / task_id / "prediction.csv"
        pred.parent.mkdir()
        pred.write_bytes(release.gold_bytes(task_id))
        verdict = evaluator.evaluate_task(
            prediction_path=pred,
            gold_path=release.gold_path(task_id),
            config=release.config(task_id),
            task_id=task_id,
        )
        assert verdict.passed, verdict
        assert release.metadata(task_id)["video"]
