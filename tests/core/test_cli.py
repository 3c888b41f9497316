import json
import shutil
import subprocess
import sys

from dataspace.cli import main
from dataspace.demo import oracle_failures
from dataspace.testing.releases import write_tiny_release


def test_dataspace_eval_is_the_official_command_line(tmp_path):
    rel = write_tiny_release(tmp_path / "rel", tasks=3)
    pred = tmp_path / "pred"
    for t in ("task_1", "task_2"):
        (pred / t).mkdir(parents=True)
        shutil.copy(rel / "output" / t / "gold.csv", pred / t / "prediction.csv")
    (pred / "task_99").mkdir()
    args = [
        "--prediction-root",
        str(pred),
        "--gold-root",
        str(rel / "output"),
        "--config-root",
        str(rel / "evaluation" / "configs"),
    ]
    assert main(["eval", *args, "--output", str(tmp_path / "a.json")]) == 0
    proc = subprocess.run(
        [sys.executable, "-m", "evaluator", *args, "--output", str(tmp_path / "b.json")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    a = (tmp_path / "a.json").read_bytes()
    assert a == (tmp_path / "b.json").read_bytes()
    summary = json.loads(a)
    assert summary["task_count"] == 3 and summary["passed_task_count"] == 2
    assert summary["unscored_prediction_tasks"] == ["task_99"]
    assert [t["error_code"] for t in summary["tasks"]][2] == "missing_prediction"


def test_dataspace_eval_fatal_error_exits_2(tmp_path, capsys):
    assert (
        main(
            [
                "eval",
                "--prediction-root",
                str(tmp_path),
                "--gold-root",
                str(tmp_path),
                "--config-root",
                str(tmp_path / "nope"),
            ]
        )
        == 2
    )


def test_demo_reports_every_attempt_the_oracle_did_not_pass():
    rows = [
        {"task_id": "task_1", "passed": True},
        {"task_id": "task_2", "passed": False, "status": "submitted"},
        {"task_id": "task_3", "passed": None, "status": "infrastructure_error"},
    ]
    assert [r["task_id"] for r in oracle_failures(rows)] == ["task_2", "task_3"]
