"""The build driver on Ray (resumable, every rejection reported) and on the real MIMIC demo."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from builder.driver import build_release
from builder.sampling.materialize import foreign_key_report
from builder.sampling.policy import SamplingPolicy
from builder.sampling.sampler import foreign_keys
from builder.spec import BuildSpec, LanguagePlan, SourceSpec
from builder.transform.schema import read_schema
from builder.transform.units import has_cjk
from dataspace.errors import ConfigError
from dataspace.release import Release


def _gold_rows(release: Release, task_id: str) -> tuple[list[str], list[list[str]]]:
    import csv
    import io

    rows = list(csv.reader(io.StringIO(release.gold_bytes(task_id).decode("utf-8"))))
    return rows[0], rows[1:]


def assert_gold_is_the_sql_on_the_task_db(release: Release) -> None:
    """Every task: executing its ledger SQL on its own task_db.sqlite gives its gold."""
    from builder.gold import execute_gold

    for task_id in release.task_ids():
        ledger = release.ledger(task_id)
        conn = sqlite3.connect(release.ledger_dir(task_id) / "task_db.sqlite")
        try:
            again = execute_gold(conn, ledger["sql"])
        finally:
            conn.close()
        assert again.csv == release.gold_bytes(task_id), task_id
        assert again.sha256 == ledger["gold_sha256"]


def _bad_items(tmp_path: Path, clinical_db: Path) -> Path:
    lines = [
        {
            "id": "good",
            "question": "How many patients are there?",
            "db_id": "mimic_mini",
            "sql": "select count(*) from patients",
        },
        {
            "id": "no-such-column",
            "question": "Which patients are listed?",
            "db_id": "mimic_mini",
            "sql": "select patients.shoe_size from patients",
        },
        {
            "id": "does-not-parse",
            "question": "Which patients are listed?",
            "db_id": "mimic_mini",
            "sql": "select from where (",
        },
        {
            "id": "current-date",
            "question": "How many patients were admitted?",
            "db_id": "mimic_mini",
            "sql": "select count(*) from admissions where admittime < current_date",
        },
        {
            "id": "empty",
            "question": "What is the gender of patient -1?",
            "db_id": "mimic_mini",
            "sql": "select gender from patients where subject_id = -1",
            # a template-covered question: a Chinese workspace gets it, so sampling sees it
            "q_tag": "what is the gender of patient {patient_id}?",
            "value": {"patient_id": "-1"},
        },
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    (tmp_path / "mimic_mini.sqlite").write_bytes(clinical_db.read_bytes())
    return path


@pytest.mark.ray
@pytest.mark.integration
def test_parallel_build_over_ray_is_resumable_and_reports_every_rejection(tmp_path, bundled_dbs):
    spec = BuildSpec(
        sources=(
            SourceSpec(
                kind="bundled",
                path="finance",
                options={"question_language": "mixed", "cache_dir": str(tmp_path / "corpora")},
                limit=24,
            ),
            SourceSpec(
                kind="bundled",
                path="clinical",
                options={"cache_dir": str(tmp_path / "corpora")},
                limit=12,
            ),
            SourceSpec(
                kind="ehrsql-jsonl", path=str(_bad_items(tmp_path, bundled_dbs["clinical"]))
            ),
        ),
        seed=7,
        languages=LanguagePlan(cross_language_share=0.7),
        sampling=SamplingPolicy(budget=60),
        stage3=None,
    )
    dest = tmp_path / "out" / "release"
    report = build_release(spec, dest, workers=2, cache_dir=tmp_path / "cache")
    release = Release(dest)
    release.check(require_gold=True)
    assert len(release.task_ids()) == len(report.accepted)
    # every one of the 36 good items is a task, or its Chinese question was declined (the
    # offline translator writes them from templates only; the fluency gate), with that reason
    declined = [r for r in report.rejected if r.corpus in ("finance", "clinical")]
    assert all(
        ("templates only" in r.reason and r.stage == "transform")
        or ("Chinese question" in r.reason and r.stage == "fluency")
        for r in declined
    ), [(r.id, r.stage, r.reason) for r in declined]
    good = [a for a in report.accepted if a.corpus in ("finance", "clinical")]
    assert len(good) + len(declined) == 36 and len(good) >= 24, (len(good), report.rejected)
    reasons = {r.id: (r.stage, r.reason) for r in report.rejected}
    assert reasons["does-not-parse"][0] == "load"
    assert reasons["no-such-column"] == ("transform", "sql unknown column 'patients.shoe_size'")
    assert reasons["current-date"][0] == "transform"
    assert "current_date is not pinned" in reasons["current-date"][1]
    assert reasons["empty"][0] == "sample" and "returns nothing" in reasons["empty"][1]
    assert all(r.stage and r.reason for r in report.rejected)
    on_disk = json.loads((dest.parent / "build_report.json").read_text(encoding="utf-8"))
    assert {r["id"] for r in on_disk["rejected"]} >= set(reasons)
    assert on_disk["workers"] == 2 and on_disk["counts"]["built"] == len(report.items)
    assert_gold_is_the_sql_on_the_task_db(release)

    cross = [t for t in release.task_ids() if release.metadata(t)["cross_language"]]
    assert cross, "some tasks cross languages"
    for t in cross:
        meta, ledger = release.metadata(t), release.ledger(t)
        assert ledger["languages"]["workspace"] == meta["workspace_language"]
        assert ledger["transform"]["gates"]["execution"]["ok"]
        if meta["workspace_language"] == "zh":
            db = read_schema(release.ledger_dir(t) / "task_db.sqlite")
            assert all(has_cjk(name) for name in db.table_names)

    again = build_release(
        spec, tmp_path / "out2" / "release", workers=2, cache_dir=tmp_path / "cache"
    )
    assert again.cached == len(report.items) and again.built == 0
    assert [a.task_id for a in again.accepted] == [a.task_id for a in report.accepted]
    for t in release.task_ids():
        assert (
            release.ledger(t)["gold_sha256"]
            == Release(tmp_path / "out2" / "release").ledger(t)["gold_sha256"]
        )


def test_spec_files_are_validated(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        "schema_version: '1.0'\nsources: [{kind: bundled, path: finance}]\n"
        "languages: {cross_language_share: 2}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="cross_language_share must be between 0 and 1"):
        BuildSpec.load(path)
    path.write_text("sources: [{kind: ehrsql, path: items.json}]\nflavour: x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown build spec fields"):
        BuildSpec.load(path)
    path.write_text(
        "sources: [{kind: ehrsql, path: items.json, limit: 5}]\nsampling: {budget: 50}\n",
        encoding="utf-8",
    )
    spec = BuildSpec.load(path)
    assert spec.sources[0].path == str(tmp_path / "items.json")
    assert spec.sampling.budget == 50 and spec.sources[0].limit == 5


@pytest.fixture(scope="module")
def mimic_release(tmp_path_factory, mimic_demo):
    """Ten MIMIC-III demo items built in-process (the full 365 belong to the benchmark)."""
    base = tmp_path_factory.mktemp("mimic")
    spec = BuildSpec(
        sources=(
            SourceSpec(
                kind="ehrsql-jsonl", path=str(mimic_demo / "ehrsql_mimic3_demo.jsonl"), limit=10
            ),
        ),
        seed=0,
        stage3=None,
    )
    report = build_release(spec, base / "release", workers=0, cache_dir=base / "cache")
    return base, report


@pytest.mark.sources
def test_mimic_sample_tasks_keep_inventory_foreign_keys_and_executed_gold(mimic_release):
    base, report = mimic_release
    release = Release(base / "release")
    release.check(require_gold=True)
    assert len(report.accepted) + len(report.rejected) == 10
    assert len(report.accepted) >= 8
    assert_gold_is_the_sql_on_the_task_db(release)
    for t in release.task_ids():
        ledger = release.ledger(t)
        task_db = release.ledger_dir(t) / "task_db.sqlite"
        key = ledger["transform"]["database"]["cache_key"]
        translated = base / "cache" / "transform" / "databases" / key[:32] / "db.sqlite"
        source_db = translated if translated.is_file() else _mimic_db()
        src_schema = read_schema(source_db)
        got = read_schema(task_db)
        assert got.inventory() == src_schema.inventory()
        fk = foreign_key_report(task_db, source_db, foreign_keys(src_schema, SamplingPolicy()))
        assert fk.ok, fk.new_dangling
        sampling = ledger["sampling"]
        assert sampling["foreign_keys"]["ok"]
        assert sum(sampling["rows_after"].values()) < sum(sampling["rows_before"].values())


def _mimic_db() -> Path:
    return (
        Path(__file__).resolve().parents[3]
        / "shared"
        / "sources"
        / "ehrsql_mimic3_demo"
        / "mimic_iii_demo.sqlite"
    )


@pytest.mark.sources
@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.integration
def test_gold_agent_scores_everything_on_the_mimic_sample(mimic_release, ray_local):
    from dataspace.runs.controller import execute_run
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    base, _report = mimic_release
    spec = RunSpec(
        run_id="gold",
        release=str(base / "release"),
        store=f"file://{base / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(memory_bytes=512 * 1024**2),
        sandbox=SandboxConfig(),
        concurrency=2,
    )
    out = execute_run(spec)
    assert out.summary["agents"]["gold"]["accuracy"] == 1.0
    assert all(r["passed"] for r in out.rows)
