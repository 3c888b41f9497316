"""Golden cases: one or more per rule of the evaluation protocol (tests/fixtures/evaluator)."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

import evaluator
from evaluator.cli import main as cli_main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluator"


def _case_files() -> list[Path]:
    return sorted(FIXTURES.glob("cases_*.json"))


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for path in _case_files():
        cases.extend(json.loads(path.read_text(encoding="utf-8"))["cases"])
    return cases


def _fatal() -> dict[str, Any]:
    return json.loads((FIXTURES / "fatal.json").read_text(encoding="utf-8"))


def case_config(case: dict[str, Any]) -> dict[str, Any]:
    """The schema-1.0 config of a golden case (always ``task_1``)."""
    return {
        "schema_version": "1.0",
        "task_id": "task_1",
        "order_sensitive": case.get("order_sensitive", False),
        "columns": [
            {"gold_index": i, "gold_name": f"c{i}", **column}
            for i, column in enumerate(case["columns"])
        ],
    }


def prediction_bytes(case: dict[str, Any]) -> bytes | None:
    """The prediction file's bytes, or None when the case has no prediction file."""
    if "prediction_b64" in case:
        return base64.b64decode(case["prediction_b64"])
    if "prediction_repeat" in case:
        spec = case["prediction_repeat"]
        text = spec["head"] + spec["body"] * spec["times"] + spec.get("tail", "")
        return text.encode("utf-8")
    if case.get("prediction") is None:
        return None
    return str(case["prediction"]).encode("utf-8")


def materialize(case: dict[str, Any], root: Path) -> tuple[Path, Path, Path]:
    """Write a golden case as a one-task suite; returns (predictions, gold, configs)."""
    predictions, gold, configs = root / "pred", root / "gold", root / "cfg"
    (predictions / "task_1").mkdir(parents=True)
    (gold / "task_1").mkdir(parents=True)
    configs.mkdir()
    (configs / "task_1.json").write_text(json.dumps(case_config(case)), encoding="utf-8")
    (gold / "task_1" / "gold.csv").write_bytes(case["gold"].encode("utf-8"))
    target = predictions / "task_1" / "prediction.csv"
    data = prediction_bytes(case)
    link = case.get("prediction_symlink")
    if link == "dangling":
        target.symlink_to(root / "nowhere.csv")
    elif link:
        assert data is not None
        real = root / "real.csv"
        real.write_bytes(data)
        target.symlink_to(real)
    elif case.get("prediction_is_dir"):
        target.mkdir()
    elif data is not None:
        target.write_bytes(data)
    return predictions, gold, configs


def _check(entry: dict[str, Any], expect: dict[str, Any]) -> None:
    passed = expect.get("passed", False)
    assert entry["passed"] is passed, entry
    assert entry["score"] == int(passed)
    if passed:
        assert entry["error_code"] is None and entry["error"] is None
        assert entry["column_mapping"] == [
            {"gold_index": j, "prediction_index": p} for j, p in enumerate(expect["mapping"])
        ]
    else:
        assert entry["column_mapping"] is None
        assert entry["error_code"] == expect["error_code"], entry
        if "error" in expect:
            assert entry["error"] == expect["error"]
        if "error_contains" in expect:
            assert expect["error_contains"] in entry["error"], entry["error"]


def test_every_case_names_its_rule_and_is_unique() -> None:
    cases = _cases()
    names = [case["name"] for case in cases]
    assert len(names) == len(set(names))
    assert all(case.get("rule") for case in cases)
    assert len(cases) >= 100


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case["name"])
def test_golden_case(case: dict[str, Any], tmp_path: Path) -> None:
    predictions, gold, configs = materialize(case, tmp_path)
    summary = evaluator.evaluate_suite(
        prediction_root=predictions, gold_root=gold, config_root=configs
    )
    (entry,) = summary["tasks"]
    _check(entry, case["expect"])
    assert summary["passed_task_count"] == int(entry["passed"])

    # The same verdict from rows in memory whenever the prediction is readable.
    data = prediction_bytes(case)
    if data is None or case.get("prediction_symlink") or case.get("prediction_is_dir"):
        return
    config = evaluator.parse_config(case_config(case), source="golden")
    gold_table = evaluator.read_csv(case["gold"].encode("utf-8"), role="gold")
    try:
        table = evaluator.read_csv(data, role="prediction")
    except evaluator.CsvError as exc:
        assert exc.code == entry["error_code"] == "invalid_prediction_csv"
        return
    verdict = evaluator.evaluate_rows(
        gold_header=gold_table.header,
        gold_rows=gold_table.rows,
        prediction_header=table.header,
        prediction_rows=table.rows,
        config=config,
    )
    assert verdict.to_dict() == entry


def _fatal_cases() -> list[dict[str, Any]]:
    data = _fatal()
    cases = []
    for case in data["cases"]:
        merged = copy.deepcopy(data["defaults"])
        merged.update(copy.deepcopy(case))
        if "config_patch" in case:
            config = copy.deepcopy(data["defaults"]["configs"]["task_1.json"])
            config.update(case["config_patch"])
            merged["configs"] = {"task_1.json": config}
        cases.append(merged)
    return cases


def _materialize_fatal(case: dict[str, Any], root: Path) -> tuple[Path, Path, Path]:
    predictions, gold, configs = root / "pred", root / "gold", root / "cfg"
    missing = set(case.get("missing", []))
    if "predictions" not in missing:
        for task, text in case["predictions"].items():
            (predictions / task).mkdir(parents=True)
            (predictions / task / "prediction.csv").write_text(text, encoding="utf-8")
        predictions.mkdir(exist_ok=True)
    if "gold" not in missing:
        gold.mkdir()
        for task, text in case["gold"].items():
            (gold / task).mkdir()
            (gold / task / "gold.csv").write_text(text, encoding="utf-8")
    if "configs" not in missing:
        configs.mkdir()
        for name, body in case["configs"].items():
            text = body if isinstance(body, str) else json.dumps(body)
            (configs / name).write_text(text, encoding="utf-8")
    return predictions, gold, configs


@pytest.mark.parametrize("case", _fatal_cases(), ids=lambda case: case["name"])
def test_fatal_case(
    case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    predictions, gold, configs = _materialize_fatal(case, tmp_path)
    with pytest.raises(evaluator.FatalError) as caught:
        evaluator.evaluate_suite(prediction_root=predictions, gold_root=gold, config_root=configs)
    message = str(caught.value)
    assert case["fatal_contains"] in message
    assert "\n" not in message

    roots = {"--prediction-root": predictions, "--gold-root": gold, "--config-root": configs}
    code = cli_main([part for flag, root in roots.items() for part in (flag, str(root))])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Evaluator fatal error: ")
    assert case["fatal_contains"] in lines[0]
    assert not (predictions / "evaluation_summary.json").exists()
