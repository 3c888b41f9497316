"""``dataspace diff`` between two releases, and the one registry every family uses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dataspace.diff import diff_releases
from dataspace.errors import ConfigError
from dataspace.registry import Registry
from dataspace.release import ReleaseWriter, TaskArtifacts


def _config(task_id: str) -> dict:
    return {
        "schema_version": "1.0",
        "task_id": task_id,
        "order_sensitive": False,
        "columns": [
            {"gold_index": 0, "gold_name": "n", "type": "number", "comparison": {"mode": "integer"}}
        ],
    }


def _task(n: int, source: str, question: str, gold: bytes, files: dict) -> TaskArtifacts:
    tid = f"task_{n}"
    return TaskArtifacts(
        task_id=tid,
        question=question,
        context=files,
        gold_csv=gold,
        config=_config(tid),
        metadata={"task_id": tid, "corpus": "c", "source_id": source},
        ledger={
            "source": {"corpus": "c", "id": source},
            "sql": "select 1",
            "languages": {},
            "seed": 0,
            "gold_sha256": "x",
        },
    )


def _release(dest: Path, tasks: list[TaskArtifacts]) -> Path:
    with ReleaseWriter(dest) as w:
        for t in tasks:
            w.add_task(t)
    return dest


@pytest.fixture()
def two_releases(tmp_path):
    a = _release(
        tmp_path / "a",
        [
            _task(1, "s1", "How many?", b"n\n1\n", {"t.csv": b"a\n1\n"}),
            _task(2, "s2", "Which?", b"n\n2\n", {"t.csv": b"a\n2\n"}),
            _task(3, "s3", "When?", b"n\n3\n", {"t.csv": b"a\n3\n"}),
        ],
    )
    # s1 was rejected this time: s2 and s3 move up one task id; s3's question and a file
    # change, s4 is new.
    b = _release(
        tmp_path / "b",
        [
            _task(1, "s2", "Which?", b"n\n2\n", {"t.csv": b"a\n2\n"}),
            _task(2, "s3", "When exactly?", b"n\n3\n", {"t.csv": b"a\n3\n", "u.json": b"[]"}),
            _task(3, "s4", "New?", b"n\n4\n", {"t.csv": b"a\n4\n"}),
        ],
    )
    return a, b


def test_diff_matches_tasks_by_source_and_names_what_changed(two_releases):
    a, b = two_releases
    d = diff_releases(a, b)
    assert not d.identical
    assert [k for k, _ in d.added] == ["c/s4"] and [k for k, _ in d.removed] == ["c/s1"]
    assert d.unchanged == 1 and d.renumbered == 2  # s2: task_2 -> task_1, unchanged
    (change,) = d.changed
    assert change.key == "c/s3" and (change.task_a, change.task_b) == ("task_3", "task_2")
    assert change.parts == ("question", "workspace")
    assert change.files == {"added": ("u.json",)}
    assert (change.question_a, change.question_b) == ("When?", "When exactly?")
    assert diff_releases(a, a).identical


def test_diff_command_prints_the_changes_and_exits_1_then_0(two_releases):
    a, b = two_releases
    cmd = [sys.executable, "-m", "dataspace.cli", "diff", str(a), str(b)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert out.returncode == 1, out.stderr
    assert "1 unchanged, 1 changed, 1 added, 1 removed" in out.stdout
    assert "~ task_3 -> task_2  c/s3: question, workspace" in out.stdout
    assert "question B: When exactly?" in out.stdout
    js = subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=False)
    assert json.loads(js.stdout)["part_counts"] == {"question": 1, "workspace": 1}
    same = subprocess.run([*cmd[:-1], str(a)], capture_output=True, text=True, check=False)
    assert same.returncode == 0 and "identical" in same.stdout
    bad = subprocess.run([*cmd[:-1], str(a / "nope")], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


def test_registry_resolves_lazily_lists_names_and_hints(tmp_path, monkeypatch):
    # A provider whose optional dependency is missing.
    (tmp_path / "dsreg_probe.py").write_text("import no_such_dependency_zz\nthing = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry = Registry("widget", {"json": "json:dumps"}, hints={"fancy": "pip install x"})
    assert reg.names() == ["json"] and "json" in reg
    assert reg.get("json") is json.dumps
    reg.register("fancy", "dsreg_probe:thing")
    missing = r"widget 'fancy' needs the missing module 'no_such_dependency_zz' \(pip install x\)"
    with pytest.raises(ConfigError, match=missing):
        reg.get("fancy")
    with pytest.raises(ConfigError, match=r"unknown widget 'nope'; known widgets: fancy .*json"):
        reg.get("nope")

    @reg.register("direct")
    def direct() -> str:
        return "ok"

    assert reg.get("direct")() == "ok"
    with pytest.raises(ValueError, match="module:attr"):
        Registry("widget", {"bad": "no-colon"})


def test_builder_families_use_the_registry():
    from builder.documents.writers import WRITERS
    from builder.render.base import RENDERERS
    from builder.sources.base import LOADERS
    from builder.taskdb import TASK_DB_STEPS
    from builder.translate.base import TRANSLATORS

    assert TRANSLATORS.names() == ["glossary", "llm"]
    assert RENDERERS.names() == ["csv", "json", "markdown", "pdf", "sqlite"]
    assert {"bull", "bundled", "ehrsql", "ehrsql-jsonl", "ehrsql2024"} <= set(LOADERS.names())
    assert {"copy", "sample"} <= set(TASK_DB_STEPS.names())
    assert WRITERS.names() == ["llm", "template"]
    assert RENDERERS.get("pdf").name == "pdf"
