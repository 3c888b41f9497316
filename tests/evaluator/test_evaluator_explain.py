"""Explanations of failed verdicts: golden cases, the official evaluator's codes, ``--explain``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import evaluator
from evaluator.cli import main as cli_main
from evaluator.explain import explain_files

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluator"
CASES = json.loads((FIXTURES / "cases_explain.json").read_text(encoding="utf-8"))["cases"]
MIRROR = Path("/work/.mirror/HKUSTDial+DataSpace/repo")
NEAR_MISS_KINDS = {"rounding", "percent", "date_format", "whitespace_case", "null_token"}


def _config(case: dict[str, Any]) -> evaluator.TaskConfig:
    names = case["gold"].splitlines()[0].split(",")
    return evaluator.parse_config(
        {
            "schema_version": "1.0",
            "task_id": "task_1",
            "order_sensitive": case.get("order_sensitive", False),
            "columns": [
                {"gold_index": i, "gold_name": names[i], **col}
                for i, col in enumerate(case["columns"])
            ],
        },
        source=case["name"],
    )


def _write(case: dict[str, Any], root: Path, task: str = "task_1") -> tuple[Path, Path, Path]:
    """Write a case as task ``task`` of a suite under ``root`` (which may hold others)."""
    pred, gold, cfg = root / "pred", root / "gold", root / "cfg"
    (pred / task).mkdir(parents=True)
    (gold / task).mkdir(parents=True)
    cfg.mkdir(exist_ok=True)
    names = case["gold"].splitlines()[0].split(",")
    conf = {
        "schema_version": "1.0",
        "task_id": task,
        "order_sensitive": case.get("order_sensitive", False),
        "columns": [
            {"gold_index": i, "gold_name": names[i], **col} for i, col in enumerate(case["columns"])
        ],
    }
    (cfg / f"{task}.json").write_text(json.dumps(conf), encoding="utf-8")
    (gold / task / "gold.csv").write_text(case["gold"], encoding="utf-8")
    if case["prediction"] is not None:
        (pred / task / "prediction.csv").write_text(case["prediction"], encoding="utf-8")
    return pred, gold, cfg


def _explained(case: dict[str, Any], tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    pred, gold, _ = _write(case, tmp_path)
    config = _config(case)
    verdict = evaluator.evaluate_task(
        prediction_path=pred / "task_1" / "prediction.csv",
        gold_path=gold / "task_1" / "gold.csv",
        config=config,
    )
    return verdict, explain_files(
        prediction_path=pred / "task_1" / "prediction.csv",
        gold_path=gold / "task_1" / "gold.csv",
        config=config,
        verdict=verdict,
    )


def test_the_cases_cover_every_code_and_near_miss_kind() -> None:
    assert len(CASES) >= 30
    assert len({c["name"] for c in CASES}) == len(CASES)
    codes = {c["expect"]["error_code"] for c in CASES}
    assert codes >= {*evaluator.ERROR_CODES, None}
    kinds = Counter(k for c in CASES for k in c["explain"].get("near_misses", []))
    assert set(kinds) == NEAR_MISS_KINDS, kinds


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_explain_case(case: dict[str, Any], tmp_path: Path) -> None:
    verdict, e = _explained(case, tmp_path)
    want = case["explain"]
    # the verdict is the official one; the explanation only adds to it
    assert verdict.passed == case["expect"]["passed"]
    assert verdict.error_code == case["expect"]["error_code"]
    assert e["error_code"] == verdict.error_code
    assert e["summary"] and all(isinstance(s, str) and s for s in e["summary"])
    text = " ".join(e["summary"])
    for piece in want.get("summary_contains", []):
        assert piece in text, (piece, e["summary"])
    if "near_misses" in want:
        assert [m["kind"] for m in e["near_misses"]] == want["near_misses"], e["near_misses"]
    if "unpartnered" in want:
        got = {c["gold_name"]: c["reason"] for c in e["columns"] if c["status"] != "matched"}
        assert got == want["unpartnered"], e["columns"]
    for key in ("missing_columns", "extra_columns"):
        if key in want:
            field = "gold_name" if key == "missing_columns" else "prediction_name"
            assert [c[field] for c in e[key]] == want[key], e[key]
    if "partners" in want:
        got = {c["gold_name"]: c["prediction_name"] for c in e["columns"]}
        assert got == want["partners"]
    if "first_differing_row" in want:
        assert e["first_differing_row"] is not None, e
        assert e["first_differing_row"]["gold_row"] == want["first_differing_row"]
    for key in ("missing_row_count", "extra_row_count"):
        if key in want:
            assert e[key] == want[key], e
    if "extra_rows" in want:
        assert [r["prediction_row"] for r in e["extra_rows"]] == want["extra_rows"]
    assert e["gold_preview"]["row_count"] == len(case["gold"].splitlines()) - 1
    json.dumps(e)  # JSON-ready


def test_official_evaluator_gives_the_same_codes(tmp_path: Path) -> None:
    if not MIRROR.exists():
        pytest.skip(f"the official repository snapshot is not at {MIRROR}")
    proc = subprocess.run(
        ["git", "-C", str(MIRROR), "show", "HEAD:evaluation/evaluate.py"],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip("the snapshot has no evaluation/evaluate.py")
    official = tmp_path / "official_evaluate.py"
    official.write_bytes(proc.stdout)
    suite = tmp_path / "suite"
    for k, case in enumerate(CASES, start=1):
        pred, gold, cfg = _write(case, suite, f"task_{k}")
    outs = []
    roots = ["--prediction-root", str(pred), "--gold-root", str(gold), "--config-root", str(cfg)]
    for cmd in ([sys.executable, str(official)], [sys.executable, "-m", "evaluator"]):
        out = tmp_path / f"summary-{len(outs)}.json"
        subprocess.run(
            [*cmd, *roots, "--output", str(out)],
            check=True,
            capture_output=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        outs.append(json.loads(out.read_text(encoding="utf-8")))
    assert outs[0]["tasks"] == outs[1]["tasks"]
    for k, case in enumerate(CASES, start=1):
        entry = outs[0]["tasks"][[t["task_id"] for t in outs[0]["tasks"]].index(f"task_{k}")]
        assert entry["error_code"] == case["expect"]["error_code"], case["name"]


def test_cli_explain_adds_explanations_and_keeps_verdicts(tmp_path: Path, capsys) -> None:
    by_name = {c["name"]: c for c in CASES}
    case = by_name["near_percent_percentage_for_fraction"]
    pred, gold, cfg = _write(case, tmp_path)
    args = ["--prediction-root", str(pred), "--gold-root", str(gold), "--config-root", str(cfg)]
    plain, explained = tmp_path / "plain.json", tmp_path / "explained.json"
    assert cli_main([*args, "--output", str(plain)]) == 0
    capsys.readouterr()
    assert cli_main([*args, "--output", str(explained), "--explain"]) == 0
    screen = capsys.readouterr().out
    a = json.loads(plain.read_text(encoding="utf-8"))
    b = json.loads(explained.read_text(encoding="utf-8"))
    task = b["tasks"][0]
    assert "near miss (percent)" in screen.casefold()
    assert "task_1: relation_mismatch" in screen
    assert [m["kind"] for m in task.pop("explanation")["near_misses"]] == ["percent"]
    assert a == b  # without the explanations, the summaries are identical
    assert "explanation" not in a["tasks"][0]
