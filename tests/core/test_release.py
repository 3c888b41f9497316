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
    (root / "input/task_12/context").mkdir(parents=True)
    (root / "input/task_12/task.json").write_text(
        json.dumps({"task_id": "task_12", "question": "Hidden gold?"})
    )
    (root / "evaluation/configs/task_12.json").write_text(
        json.dumps(
            {
                "schema_version": "1.0",
                "task_id": "task_12",
                "order_sensitive": True,
                "columns": [{"gold_index": 0, "gold_name": "x", "type": "text"}],
            }
        )
    )
    return root


def test_reads_the_official_layout_unchanged(tmp_path):
    rel = Release(_official(tmp_path))
    assert rel.task_ids() == ["task_7", "task_12"]
    t = rel.task("task_7")
    assert t.question == "How many?" and t.raw["difficulty"] == "x"
    assert rel.workspace("task_7").joinpath("sub/data.csv").is_file()
    assert rel.has_gold("task_7") and not rel.has_gold("task_12")
    assert rel.config("task_12").order_sensitive is True
    assert rel.metadata("task_7") is None and rel.ledger("task_7") is None
    rel.check()
    with pytest.raises(ReleaseError, match="gold answer is missing"):
        rel.check(require_gold=True)


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
