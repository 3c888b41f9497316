import json
import subprocess
import sys

import pytest

from dataspace.errors import ReleaseError
from dataspace.release import Release, ReleaseWriter, TaskArtifacts
from dataspace.testing.releases import write_tiny_release


def _official(tmp_path):
    """A release in exactly the official layout (no metadata, no ledger, no manifest)."""
    root = tmp_path / "official"
    (root / "input/task_7/context/sub").mkdir(parents=True)
    (root / "input/task_7/task.json").write_text(
        json.dumps({"task_id": "task_7", "question": "How many?", "difficulty": "x"})
    )
    (root / "input/task_7/context/sub/data.csv").write_text("a\n1\n")
    (root / "output/task_7").mkdir(parents=True)
    (root / "output/task_7/gold.csv").write_text("n\n1\n")
    (root / "evaluation/configs").mkdir(parents=True)
    (root / "evaluation/configs/task_7.json").write_text(
        json.dumps(
            {
                "schema_version": "1.0",
                "task_id": "task_7",
                "order_sensitive": False,
                "columns": [
                    {
                        "gold_index": 0,
                        "gold_name": "n",
                        "type": "number",
                        "comparison": {"mode": "integer"},
                    }
                ],
            }
        )
    )
    # an unscored task, as 350 of the official 410 are: input only, no gold, no config
    (root / "input/task_12/context").mkdir(parents=True)
    (root / "input/task_12/task.json").write_text(
        json.dumps({"task_id": "task_12", "question": "Hidden gold?"})
    )
    return root


_CONFIG_12 = {
    "schema_version": "1.0",
    "task_id": "task_12",
    "order_sensitive": True,
    "columns": [{"gold_index": 0, "gold_name": "x", "type": "text"}],
}


def test_reads_the_official_layout_unchanged(tmp_path):
    rel = Release(_official(tmp_path))
    assert rel.task_ids() == ["task_7", "task_12"]
    t = rel.task("task_7")
    assert t.question == "How many?" and t.raw["difficulty"] == "x"
    assert rel.workspace("task_7").joinpath("sub/data.csv").is_file()
    assert rel.has_gold("task_7") and not rel.has_gold("task_12")
    assert rel.is_scored("task_7") and not rel.is_scored("task_12")
    assert rel.config("task_7").order_sensitive is False
    assert rel.metadata("task_7") is None and rel.ledger("task_7") is None
    counts = rel.check()
    assert (counts.tasks, counts.scored, counts.unscored) == (
        ("task_7", "task_12"),
        ("task_7",),
        ("task_12",),
    )
    assert counts.describe() == "1 scored of 2 tasks, 1 unscored (no gold)"
    with pytest.raises(ReleaseError, match="gold answer is missing"):
        rel.check(require_gold=True)


@pytest.mark.parametrize(
    ("breakage", "where", "problem"),
    [
        (
            # a config without gold stops the official evaluator
            lambda r: (r / "evaluation/configs/task_12.json").write_text(json.dumps(_CONFIG_12)),
            "output/task_12/gold.csv",
            "gold answer is missing but the task has a config",
        ),
        (
            # gold without a config would silently leave the task out of the denominator
            lambda r: (
                (r / "output/task_12").mkdir()
                or (r / "output/task_12/gold.csv").write_text("x\na\n")
            ),
            "evaluation/configs/task_12.json",
            "config is missing but the task has gold",
        ),
        (
            # the official evaluator would count a config whose task has no input
            lambda r: (r / "evaluation/configs/task_99.json").write_text(
                json.dumps({**_CONFIG_12, "task_id": "task_99"})
            ),
            "evaluation/configs/task_99.json",
            "no input/task_99/ folder",
        ),
        (
            lambda r: (
                (r / "output/task_98").mkdir()
                or (r / "output/task_98/gold.csv").write_text("x\na\n")
            ),
            "output/task_98/gold.csv",
            "no input/task_98/ folder",
        ),
    ],
)
def test_half_scored_tasks_are_errors(tmp_path, breakage, where, problem):
    """Guards the scored/unscored split: a task has both gold and config, or neither."""
    root = _official(tmp_path)
    breakage(root)
    with pytest.raises(ReleaseError) as ei:
        Release(root).check()
    assert where in str(ei.value) and problem in str(ei.value)
    proc = subprocess.run(
        [sys.executable, "-m", "dataspace.cli", "validate", str(root)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and where in proc.stderr and problem in proc.stderr


def test_writer_writes_unscored_tasks_and_refuses_half_scored_ones(tmp_path):
    cfg = {**_CONFIG_12, "task_id": "task_1"}
    with ReleaseWriter(tmp_path / "r") as w:
        w.add_task(
            TaskArtifacts(
                task_id="task_1", question="q", context={}, gold_csv=b"x\na\n", config=cfg
            )
        )
        w.add_task(
            TaskArtifacts(
                task_id="task_2",
                question="q",
                context={"a.csv": b"a\n"},
                gold_csv=None,
                config=None,
            )
        )
    rel = Release(tmp_path / "r")
    assert rel.check().describe() == "1 scored of 2 tasks, 1 unscored (no gold)"
    assert not (tmp_path / "r/evaluation/configs/task_2.json").exists()
    with (
        pytest.raises(ReleaseError, match="both gold and a config"),
        ReleaseWriter(tmp_path / "r2") as w,
    ):
        w.add_task(
            TaskArtifacts(
                task_id="task_3",
                question="q",
                context={},
                gold_csv=None,
                config={**cfg, "task_id": "task_3"},
            )
        )
    assert not (tmp_path / "r2").exists()


def test_writer_round_trip_and_fingerprint(tmp_path):
    root = write_tiny_release(tmp_path / "rel", tasks=3)
    rel = Release(root)
    rel.check(require_gold=True)
    assert rel.task_ids() == ["task_1", "task_2", "task_3"]
    assert rel.metadata("task_2")["order_sensitive"] is True
    assert json.loads((root / "release.json").read_text())["task_count"] == 3
    fp = rel.fingerprint()
    assert fp == Release(root).fingerprint()
    (root / "output/task_1/gold.csv").write_text("city,population\nX,1\n")
    assert Release(root).fingerprint() != fp


@pytest.mark.parametrize(
    ("breakage", "where", "problem"),
    [
        (
            lambda r: (r / "input/task_7/task.json").unlink(),
            "input/task_7/task.json",
            "file is missing",
        ),
        (
            lambda r: (r / "evaluation/configs/task_7.json").write_text("{not json"),
            "evaluation/configs/task_7.json",
            "",
        ),
        (
            lambda r: (r / "evaluation/configs/task_7.json").write_text(
                json.dumps(
                    {
                        "schema_version": "1.0",
                        "task_id": "task_7",
                        "order_sensitive": False,
                        "columns": [],
                    }
                )
            ),
            "evaluation/configs/task_7.json",
            "",
        ),
        (
            lambda r: (r / "output/task_7/gold.csv").write_text("n,m\n1\n"),
            "output/task_7/gold.csv",
            "",
        ),
        (
            lambda r: (r / "metadata").mkdir() or (r / "metadata/task_7.json").write_text("[1"),
            "metadata/task_7.json",
            "invalid JSON",
        ),
    ],
)
def test_bad_release_files_are_named_in_one_line(tmp_path, breakage, where, problem):
    root = _official(tmp_path)
    breakage(root)
    with pytest.raises(ReleaseError) as ei:
        Release(root).check()
    msg = str(ei.value)
    assert where in msg and problem in msg and "\n" not in msg
    # the CLI says the same in one line and exits non-zero
    proc = subprocess.run(
        [sys.executable, "-m", "dataspace.cli", "validate", str(root)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and where in proc.stderr


def test_failed_build_leaves_no_partial_release(tmp_path):
    dest = tmp_path / "rel"
    good = TaskArtifacts(
        task_id="task_1",
        question="q",
        context={"a.csv": b"a\n1\n"},
        gold_csv=b"a\n1\n",
        config={
            "schema_version": "1.0",
            "task_id": "task_1",
            "order_sensitive": False,
            "columns": [{"gold_index": 0, "gold_name": "a", "type": "text"}],
        },
    )
    ragged = TaskArtifacts(
        task_id="task_2",
        question="q",
        context={},
        gold_csv=b"a\n1,2\n",
        config={**good.config, "task_id": "task_2"},
    )
    with pytest.raises(ReleaseError, match=r"output/task_2/gold\.csv"), ReleaseWriter(dest) as w:
        w.add_task(good)
        w.add_task(ragged)
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []


def test_writer_rejects_config_for_another_task_and_path_escapes(tmp_path):
    cfg = {
        "schema_version": "1.0",
        "task_id": "task_9",
        "order_sensitive": False,
        "columns": [{"gold_index": 0, "gold_name": "a", "type": "text"}],
    }
    with pytest.raises(ReleaseError), ReleaseWriter(tmp_path / "r") as w:
        w.add_task(
            TaskArtifacts(
                task_id="task_1", question="q", context={}, gold_csv=b"a\n1\n", config=cfg
            )
        )
    with (
        pytest.raises(ReleaseError, match="inside its folder"),
        ReleaseWriter(tmp_path / "r2") as w,
    ):
        w.add_task(
            TaskArtifacts(
                task_id="task_1",
                question="q",
                context={"../evil.csv": b"x"},
                gold_csv=b"a\n1\n",
                config={**cfg, "task_id": "task_1"},
            )
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_fingerprint_depends_on_content_not_timestamps(tmp_path):
    """Guards resuming a demo after a byte-identical rebuild (same run, same fingerprint)."""
    import os

    root = write_tiny_release(tmp_path / "rel", tasks=1)
    big = root / "input/task_1/context/big.bin"
    big.write_bytes(b"x" * (5 << 20))
    fp = Release(root).fingerprint()
    os.utime(big, (1, 1))
    os.utime(root / "input/task_1/task.json", (1, 1))
    assert Release(root).fingerprint() == fp
    data = bytearray(big.read_bytes())
    data[-10] = ord("y")
    big.write_bytes(bytes(data))
    assert Release(root).fingerprint() != fp


def test_the_official_shape_410_inputs_60_configs_validates(tmp_path):
    """Guards running the real release: 410 task inputs, gold and configs for 60."""
    import random

    from dataspace.testing.releases import write_official_release

    scored = tuple(sorted(random.Random(0).sample(range(1, 411), 60)))
    root = write_official_release(tmp_path / "rel", tasks=410, scored=scored)
    counts = Release(root).check()
    assert len(counts.tasks) == 410 and counts.scored == tuple(f"task_{k}" for k in scored)
    proc = subprocess.run(
        [sys.executable, "-m", "dataspace.cli", "validate", str(root)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "410 tasks, all valid; 60 scored of 410 tasks, 350 unscored (no gold)" in proc.stdout
