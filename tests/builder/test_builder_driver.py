"""The build driver end to end: bundled release, ledgers, rejections, atomic writes."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import evaluator
from builder.driver import build_release, build_task
from builder.errors import BuildError
from builder.gold import gold_from_ledger
from builder.sources import load_source
from builder.sqlinfo import OPERATIONS
from dataspace.errors import ConfigError, ReleaseError
from dataspace.release import LEDGER_REQUIRED_KEYS, Release
from tests.builder.conftest import plain_spec

REPO = Path(__file__).resolve().parents[2]


def _tasks(release: Path) -> list[str]:
    return Release(release).task_ids()


def test_bundled_release_is_valid_and_complete(bundled_release):
    dest, report = bundled_release
    release = Release(dest)
    release.check(require_gold=True)
    ids = release.task_ids()
    assert len(ids) >= 50
    assert [a.task_id for a in report.accepted] == [f"task_{n}" for n in range(1, len(ids) + 1)]
    assert ids == [a.task_id for a in report.accepted]
    assert {a.corpus for a in report.accepted} == {"finance", "clinical"}
    manifest = json.loads((dest / "release.json").read_text(encoding="utf-8"))
    assert manifest["task_count"] == len(ids)
    on_disk = json.loads((dest.parent / "build_report.json").read_text(encoding="utf-8"))
    counts = on_disk["counts"]
    assert (counts["accepted"], counts["rejected"]) == (len(ids), len(report.rejected))
    assert counts["skipped"] == 2
    assert on_disk["accepted"][0] == {"corpus": "finance", "id": "0", "task_id": "task_1"}
    from builder.stages import STAGES

    assert set(on_disk["timings"]) >= {"load", "write"} | {s.__name__ for s in STAGES}


def test_gold_rederived_from_every_ledger(bundled_release):
    dest, _ = bundled_release
    release = Release(dest)
    for task_id in release.task_ids():
        ledger = release.ledger(task_id)
        assert ledger is not None
        assert set(LEDGER_REQUIRED_KEYS) <= set(ledger)
        ldir = release.ledger_dir(task_id)
        gold = release.gold_bytes(task_id)
        assert gold_from_ledger(ldir).csv == gold, task_id
        assert ledger["gold_sha256"] == hashlib.sha256(gold).hexdigest()
        db = (ldir / "task_db.sqlite").read_bytes()
        assert ledger["task_db_sha256"] == hashlib.sha256(db).hexdigest()
        assert set(ledger["languages"]) >= {"question", "workspace"}
        assert set(ledger["source"]) >= {"corpus", "id"}
        assert set(ledger["routing"]) == set(ledger["row_counts"])


def test_gold_scores_full_marks_with_the_evaluator(bundled_release, tmp_path):
    dest, _ = bundled_release
    predictions = tmp_path / "predictions"
    for task_id in _tasks(dest):
        (predictions / task_id).mkdir(parents=True)
        shutil.copyfile(
            dest / "output" / task_id / "gold.csv", predictions / task_id / "prediction.csv"
        )
    summary = evaluator.evaluate_suite(
        prediction_root=predictions,
        gold_root=dest / "output",
        config_root=dest / "evaluation" / "configs",
    )
    assert summary["task_accuracy"] == 1.0
    assert summary["task_count"] == len(_tasks(dest))


def test_metadata_describes_each_task(bundled_release):
    dest, _ = bundled_release
    release = Release(dest)
    cross = 0
    for task_id in release.task_ids():
        meta = release.metadata(task_id)
        assert meta is not None
        ledger = release.ledger(task_id)
        assert set(meta["modalities_required"]) <= set(meta["modalities_present"])
        assert meta["modalities_required"], task_id
        assert set(meta["operations"]) <= set(OPERATIONS)
        files = [p for p in release.workspace(task_id).rglob("*") if p.is_file()]
        assert meta["workspace_file_count"] == len(files)
        assert meta["workspace_bytes"] == release.workspace_bytes(task_id)
        gold = evaluator.read_csv(release.gold_bytes(task_id), role="gold")
        assert (meta["answer_rows"], meta["answer_columns"]) == (len(gold.rows), len(gold.header))
        config = json.loads(release.config_path(task_id).read_text(encoding="utf-8"))
        assert meta["order_sensitive"] == config["order_sensitive"]
        assert meta["question_language"] == ledger["languages"]["question"]
        assert meta["domain"] in {"fund", "stock", "macro", "healthcare"}
        cross += meta["cross_language"]
    assert cross > 0


def test_workspace_holds_every_table_and_nothing_else(bundled_release):
    dest, _ = bundled_release
    release = Release(dest)
    for task_id in release.task_ids()[:10]:
        ledger = release.ledger(task_id)
        ws = release.workspace(task_id)
        names = {p.name for p in ws.iterdir()}
        assert names == {r["path"] for r in ledger["routing"].values()}
        assert not names & {"gold.csv", "ledger.json", "task_db.sqlite"}
        task = json.loads((release.task_dir(task_id) / "task.json").read_text("utf-8"))
        assert set(task) == {"task_id", "question"}


def test_build_task_is_deterministic(bundled_cache):
    items = load_source("bundled", "clinical", cache_dir=bundled_cache)
    spec = plain_spec(seed=7)
    first = build_task(items[3], spec, task_id="task_1")
    again = build_task(items[3], spec, task_id="task_1")
    assert dict(first.context) == dict(again.context)
    assert first.gold_csv == again.gold_csv
    assert dict(first.config) == dict(again.config)
    assert json.dumps(first.ledger) == json.dumps(again.ledger)
    assert json.dumps(first.metadata) == json.dumps(again.metadata)
    routings = {
        json.dumps(build_task(items[3], plain_spec(seed=s)).ledger["routing"], sort_keys=True)
        for s in range(4)
    }
    assert len(routings) > 1


def test_stages_carry_their_results_instead_of_redoing_them(bundled_cache, monkeypatch):
    """Guards the one-pass pipeline: with documents on, the task database is made once, the
    gold SQL executed once and the workspace rendered once per task."""
    import importlib

    import builder.taskdb as taskdb
    from builder.semantics import SemanticsOptions

    # The stage modules share their function's name, so import them by path.
    gold_stage = importlib.import_module("builder.stages.gold")
    render_stage = importlib.import_module("builder.stages.render")

    calls = {"step": 0, "execute_gold": 0, "render_routed": 0}
    real_step, real_gold, real_render = (
        taskdb.get_task_db_step,
        gold_stage.execute_gold,
        render_stage.render_routed,
    )

    def get_step(name):
        step = real_step(name)

        def counted(*args, **kwargs):
            calls["step"] += 1
            return step(*args, **kwargs)

        return counted

    def execute_gold(*args, **kwargs):
        calls["execute_gold"] += 1
        return real_gold(*args, **kwargs)

    def render_routed(*args, **kwargs):
        calls["render_routed"] += 1
        return real_render(*args, **kwargs)

    monkeypatch.setattr(taskdb, "get_task_db_step", get_step)
    monkeypatch.setattr(gold_stage, "execute_gold", execute_gold)
    monkeypatch.setattr(render_stage, "render_routed", render_routed)
    items = load_source("bundled", "clinical", cache_dir=bundled_cache)
    spec = plain_spec(semantics=SemanticsOptions(order_share=0.0), stage3={"video": False})
    art = build_task(items[3], spec)
    assert art.metadata["modalities_present"]
    assert calls == {"step": 1, "execute_gold": 1, "render_routed": 1}


def test_bad_items_are_reported_and_the_batch_goes_on(corpora, tmp_path):
    items = load_source("ehrsql", corpora / "ehrsql" / "valid.json")
    report = build_release(plain_spec(seed=1), tmp_path / "out" / "release", items=items)
    assert [(a.id, a.task_id) for a in report.accepted] == [
        ("a1", "task_1"),
        ("a2", "task_2"),
        ("a3", "task_3"),
    ]
    rejected = {r.id: r for r in report.rejected}
    assert {k: v.stage for k, v in rejected.items()} == {"b1": "load", "b2": "load", "b3": "gold"}
    assert rejected["b3"].reason == "the query returns no rows"
    assert report.skipped == ("n1",)
    data = json.loads((tmp_path / "out" / "build_report.json").read_text(encoding="utf-8"))
    assert {r["id"] for r in data["rejected"]} == {"b1", "b2", "b3"}
    assert _tasks(tmp_path / "out" / "release") == ["task_1", "task_2", "task_3"]
    gold = (tmp_path / "out" / "release" / "output" / "task_2" / "gold.csv").read_text()
    assert gold == "count( distinct admissions.subject_id )\n2\n"


def test_unreadable_database_during_build_rejects_its_items_only(corpora, tmp_path):
    good = load_source("bull", corpora / "bull")
    doomed = load_source("ehrsql", corpora / "ehrsql" / "valid.json")
    db = corpora / "ehrsql" / "mini.sqlite"
    db.write_bytes(b"no longer a database" * 50)
    report = build_release(plain_spec(), tmp_path / "release", items=good + doomed)
    assert [a.id for a in report.accepted] == ["0", "1", "2"]
    unreadable = [r for r in report.rejected if r.stage == "transform"]
    assert [r.id for r in unreadable] == ["a1", "a2", "a3", "b3"]
    assert all(str(db) in r.reason and "\n" not in r.reason for r in unreadable)
    assert all("cannot read schema" in r.reason for r in unreadable)


def test_every_item_rejected_raises_after_writing_the_report(corpora, tmp_path):
    items = load_source("ehrsql", corpora / "ehrsql" / "valid.json")
    (corpora / "ehrsql" / "mini.sqlite").write_bytes(b"x" * 100)
    with pytest.raises(BuildError, match="were rejected"):
        build_release(plain_spec(), tmp_path / "release", items=items)
    assert not (tmp_path / "release").exists()
    assert (tmp_path / "build_report.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".release")]


def test_bad_options_fail_before_any_work(corpora, tmp_path):
    items = load_source("ehrsql", corpora / "ehrsql" / "valid.json")
    with pytest.raises(ConfigError, match="unknown renderer 'docx'"):
        build_release(plain_spec(renderers=("docx",)), tmp_path / "release", items=items)
    with pytest.raises(ConfigError, match="unknown task database step"):
        build_release(plain_spec(task_db="subsample"), tmp_path / "release", items=items)
    with pytest.raises(ConfigError, match="unknown translator 'babel'"):
        build_release(plain_spec(translator={"name": "babel"}), tmp_path / "release", items=items)
    assert not (tmp_path / "release").exists()
    assert not (tmp_path / "build_report.json").exists()


def test_existing_release_is_not_overwritten(corpora, tmp_path):
    items = load_source("ehrsql", corpora / "ehrsql" / "valid.json")
    build_release(plain_spec(), tmp_path / "release", items=items)
    with pytest.raises(ReleaseError, match="already exists"):
        build_release(plain_spec(), tmp_path / "release", items=items)
    report = build_release(plain_spec(), tmp_path / "release", items=items, replace=True)
    assert len(report.accepted) == 3


def test_renderer_subset_is_respected(corpora, tmp_path):
    items = load_source("bull", corpora / "bull")
    build_release(plain_spec(renderers=("json",)), tmp_path / "release", items=items)
    release = Release(tmp_path / "release")
    for task_id in release.task_ids():
        assert release.metadata(task_id)["modalities_present"] == ["json"]


def test_failure_during_writing_leaves_no_partial_release(corpora, bundled_cache, tmp_path):
    """Guards ReleaseWriter's clean-up when a disk write fails half-way through writing a
    release (every item is in the item cache, so the failing write is the release's own)."""
    script = textwrap.dedent("""
        import resource, signal, sys
        from pathlib import Path
        from builder.driver import build_release
        from builder.sources import load_source
        from tests.builder.conftest import plain_spec
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        small = load_source("ehrsql", sys.argv[1])
        big = load_source("bundled", "finance", cache_dir=sys.argv[2])
        cache = Path(sys.argv[4])
        build_release(plain_spec(), cache.parent / "first", items=small + big, cache_dir=cache)
        resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))
        try:
            build_release(plain_spec(), sys.argv[3], items=small + big, cache_dir=cache)
        except OSError as exc:
            print("write failed:", exc.strerror)
            sys.exit(3)
    """)
    load_source("bundled", "finance", cache_dir=bundled_cache)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(corpora / "ehrsql" / "valid.json"),
            str(bundled_cache),
            str(out / "release"),
            str(tmp_path / "cache"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 3, proc.stderr
    assert "File too large" in proc.stdout
    assert list(out.iterdir()) == []


@pytest.mark.sources
@pytest.mark.slow
def test_real_ehrsql_mimic3_demo_builds(mimic_demo, tmp_path):
    items = load_source("ehrsql-jsonl", mimic_demo / "ehrsql_mimic3_demo.jsonl")
    picked = [items[i] for i in (0, 40, 120, 200, 300)]
    report = build_release(plain_spec(seed=3), tmp_path / "release", items=picked)
    assert len(report.accepted) == 5, report.rejected
    release = Release(tmp_path / "release")
    release.check(require_gold=True)
    for task_id in release.task_ids():
        ledger = release.ledger(task_id)
        assert len(ledger["routing"]) == 17
        assert gold_from_ledger(release.ledger_dir(task_id)).csv == release.gold_bytes(task_id)
