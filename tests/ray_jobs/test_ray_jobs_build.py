import json

from dataspace.release import Release
from ray_jobs import build


def test_build_job_builds_a_spec_with_all_stages(tmp_path, capsys):
    spec = tmp_path / "build.yaml"
    spec.write_text(
        "sources:\n  - {kind: bundled, path: clinical, limit: 4}\n"
        "languages: {cross_language_share: 1.0}\n"
        "stage3: {video_share: 0.0}\n"
    )
    dest = tmp_path / "rel"
    assert build.main(["--spec", str(spec), "--dest", str(dest), "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "built 4 tasks" in out
    rel = Release(dest)
    rel.check(require_gold=True)
    for task_id in rel.task_ids():
        ledger = rel.ledger(task_id)
        assert "transform" in ledger and "sampling" in ledger and "stage3" in ledger
        meta = rel.metadata(task_id)
        assert meta["question_language"] != meta["workspace_language"]
    report = json.loads((tmp_path / "build_report.json").read_text())
    assert report["rejected"] == []
