"""The evaluator's public API, command line and summary format."""

from __future__ import annotations

import doctest
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import evaluator
import evaluator.canonical
import evaluator.config
from evaluator.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]

TEXT_CONFIG = {
    "schema_version": "1.0",
    "task_id": "task_1",
    "order_sensitive": False,
    "columns": [{"gold_index": 0, "gold_name": "v", "type": "text"}],
}

ENTRY_KEYS = [
    "task_id",
    "passed",
    "score",
    "order_sensitive",
    "gold_column_count",
    "prediction_column_count",
    "gold_row_count",
    "prediction_row_count",
    "column_mapping",
    "error_code",
    "error",
]
SUMMARY_KEYS = [
    "evaluator",
    "evaluator_version",
    "config_schema_version",
    "config_set_sha256",
    "metric",
    "task_count",
    "passed_task_count",
    "failed_task_count",
    "task_accuracy",
    "unscored_prediction_tasks",
    "tasks",
]


def _suite(root: Path, tasks: dict[str, tuple[str, str | None]]) -> tuple[Path, Path, Path]:
    """tasks: id -> (gold CSV, prediction CSV or None); one text column each."""
    predictions, gold, configs = root / "pred", root / "gold", root / "cfg"
    for folder in (predictions, gold, configs):
        folder.mkdir()
    for task_id, (gold_csv, prediction_csv) in tasks.items():
        (configs / f"{task_id}.json").write_text(
            json.dumps({**TEXT_CONFIG, "task_id": task_id}), encoding="utf-8"
        )
        (gold / task_id).mkdir()
        (gold / task_id / "gold.csv").write_text(gold_csv, encoding="utf-8")
        if prediction_csv is not None:
            (predictions / task_id).mkdir()
            (predictions / task_id / "prediction.csv").write_text(prediction_csv, encoding="utf-8")
    return predictions, gold, configs


def test_doctests_of_pure_functions() -> None:
    for module in (evaluator.canonical, evaluator.config):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_package_uses_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import evaluator, evaluator.cli; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "bad = sorted(m for m in new if m != 'evaluator' and m not in sys.stdlib_module_names "
        "and not m.startswith('_')); print(bad)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_parse_config_returns_frozen_typed_config() -> None:
    config = evaluator.parse_config(
        {
            "schema_version": "1.0",
            "task_id": "task_3",
            "order_sensitive": True,
            "columns": [
                {"gold_index": 0, "gold_name": "a", "type": "text"},
                {
                    "gold_index": 1,
                    "gold_name": "b",
                    "type": "number",
                    "comparison": {"mode": "decimal_places", "digits": 2},
                    "unit": "fraction",
                    "allow_percent_sign": True,
                },
            ],
        },
        source="inline",
    )
    assert config.task_id == "task_3" and config.order_sensitive is True
    number = config.columns[1]
    assert (number.comparison_mode, number.comparison_digits, number.unit) == (
        "decimal_places",
        2,
        "fraction",
    )
    assert number.allow_percent_sign is True
    with pytest.raises(AttributeError):
        config.task_id = "task_4"  # type: ignore[misc]


def test_parse_config_accepts_what_the_official_evaluator_accepts() -> None:
    """Regression: ``gold_index: 0.0`` and ``digits: true`` pass the official checks."""
    config = evaluator.parse_config(
        {
            "schema_version": "1.0",
            "task_id": "task_1",
            "order_sensitive": False,
            "columns": [
                {
                    "gold_index": 0.0,
                    "gold_name": "a",
                    "type": "number",
                    "comparison": {"mode": "significant_digits", "digits": True},
                }
            ],
        },
        source="inline",
    )
    assert config.columns[0].gold_index == 0
    assert config.columns[0].comparison_digits == 1


def test_canonical_config_json_compares_meaning() -> None:
    base = {
        "schema_version": "1.0",
        "task_id": "task_1",
        "order_sensitive": False,
        "columns": [
            {"gold_index": 0, "gold_name": "n", "type": "number", "comparison": {"mode": "integer"}}
        ],
    }
    explicit = json.loads(json.dumps(base))
    explicit["columns"][0].update({"unit": "plain", "allow_percent_sign": False})
    other = json.loads(json.dumps(base))
    other["columns"][0]["comparison"] = {"mode": "decimal_places", "digits": 0}
    canon = evaluator.canonical_config_json
    parse = evaluator.parse_config
    assert canon(parse(base, source="a")) == canon(parse(explicit, source="b"))
    assert canon(parse(base, source="a")) != canon(parse(other, source="c"))


def test_load_config_checks_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "task_2.json"
    path.write_text(json.dumps(TEXT_CONFIG), encoding="utf-8")
    with pytest.raises(evaluator.FatalError, match=r"task_2\.json vs task_1"):
        evaluator.load_config(path)
    good = tmp_path / "task_1.json"
    good.write_text(json.dumps(TEXT_CONFIG), encoding="utf-8")
    assert evaluator.load_config(good).task_id == "task_1"


def test_read_csv_from_bytes_and_path(tmp_path: Path) -> None:
    data = '\ufeffa,b\r\n1,"x\ny"\r\n'.encode()
    path = tmp_path / "p.csv"
    path.write_bytes(data)
    from_bytes = evaluator.read_csv(data, role="prediction")
    from_path = evaluator.read_csv(path, role="prediction")
    assert from_bytes == from_path
    assert from_path.header == ("a", "b")
    assert from_path.rows == (("1", "x\ny"),)


def test_read_csv_errors_by_role(tmp_path: Path) -> None:
    missing = tmp_path / "absent.csv"
    with pytest.raises(evaluator.CsvError) as caught:
        evaluator.read_csv(missing, role="prediction")
    assert caught.value.code == "missing_prediction"
    with pytest.raises(evaluator.FatalError, match="Missing CSV file"):
        evaluator.read_csv(missing, role="gold")
    with pytest.raises(evaluator.CsvError) as caught:
        evaluator.read_csv(b"a,b\n1\n", role="prediction", name="answer.csv")
    assert caught.value.code == "invalid_prediction_csv"
    assert str(caught.value) == "Non-rectangular CSV answer.csv: row 2 has 1 cells; expected 2"
    with pytest.raises(evaluator.FatalError, match="Non-rectangular CSV"):
        evaluator.read_csv(b"a,b\n1\n", role="gold")
    with pytest.raises(ValueError, match="role"):
        evaluator.read_csv(b"a\n", role="agent")  # type: ignore[arg-type]


def test_read_csv_restores_the_field_size_limit() -> None:
    import csv

    before = csv.field_size_limit()
    evaluator.read_csv(b"a\n1\n", role="gold")
    assert csv.field_size_limit() == before


def test_evaluate_task_verdict_and_entry_order(tmp_path: Path) -> None:
    predictions, gold, configs = _suite(tmp_path, {"task_1": ("v\nA\nB\n", "w\nB\nA\n")})
    config = evaluator.load_config(configs / "task_1.json")
    verdict = evaluator.evaluate_task(
        task_id="task_1",
        prediction_path=predictions / "task_1" / "prediction.csv",
        gold_path=gold / "task_1" / "gold.csv",
        config=config,
    )
    assert verdict.passed and verdict.score == 1
    assert verdict.column_mapping == (evaluator.ColumnPair(0, 0),)
    entry = verdict.to_dict()
    assert list(entry) == ENTRY_KEYS
    assert entry["column_mapping"] == [{"gold_index": 0, "prediction_index": 0}]
    with pytest.raises(ValueError, match="does not match"):
        evaluator.evaluate_task(
            task_id="task_9",
            prediction_path=predictions / "task_1" / "prediction.csv",
            gold_path=gold / "task_1" / "gold.csv",
            config=config,
        )


def test_evaluate_rows_checks_shapes() -> None:
    config = evaluator.parse_config(TEXT_CONFIG, source="inline")
    verdict = evaluator.evaluate_rows(
        gold_header=["v"],
        gold_rows=[["A"]],
        prediction_header=["v"],
        prediction_rows=[["A", "B"]],
        config=config,
    )
    assert verdict.error_code == "invalid_prediction_csv"
    assert verdict.prediction_column_count == 0
    with pytest.raises(evaluator.FatalError, match="Non-rectangular"):
        evaluator.evaluate_rows(
            gold_header=["v"],
            gold_rows=[[]],
            prediction_header=["v"],
            prediction_rows=[["A"]],
            config=config,
        )


def test_summary_format_order_hash_and_unscored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    predictions, gold, configs = _suite(
        tmp_path,
        {
            "task_10": ("v\nA\n", "v\nA\n"),
            "task_2": ("v\nA\n", "v\nB\n"),
            "task_3": ("v\nA\n", None),
        },
    )
    for extra in ("task_11", "task_7", "task_x", "notes"):
        (predictions / extra).mkdir()
    (predictions / "task_20.txt").write_text("not a folder", encoding="utf-8")
    summary = evaluator.evaluate_suite(
        prediction_root=predictions, gold_root=gold, config_root=configs
    )
    assert capsys.readouterr() == ("", "")  # the library never prints
    assert list(summary) == SUMMARY_KEYS
    assert summary["evaluator"] == "DataSpace Evaluator"
    assert summary["evaluator_version"] == "1.0.0"
    assert summary["config_schema_version"] == "1.0"
    assert summary["metric"] == "task_accuracy"
    assert [task["task_id"] for task in summary["tasks"]] == ["task_2", "task_3", "task_10"]
    assert [task["error_code"] for task in summary["tasks"]] == [
        "relation_mismatch",
        "missing_prediction",
        None,
    ]
    assert (summary["task_count"], summary["passed_task_count"]) == (3, 1)
    assert summary["failed_task_count"] == 2
    assert summary["task_accuracy"] == pytest.approx(1 / 3)
    assert summary["unscored_prediction_tasks"] == ["task_7", "task_11"]
    digest = hashlib.sha256()
    for name in ("task_2.json", "task_3.json", "task_10.json"):
        digest.update(name.encode() + b"\0" + (configs / name).read_bytes() + b"\0")
    assert summary["config_set_sha256"] == digest.hexdigest()


def test_cli_writes_the_summary_next_to_predictions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _suite(tmp_path, {"task_1": ("v\nÄ\n", "v\nÄ\n")})
    monkeypatch.chdir(tmp_path)
    code = cli_main(["--prediction-root", "pred", "--gold-root", "gold", "--config-root", "cfg"])
    out = capsys.readouterr().out
    assert code == 0
    written = tmp_path / "pred" / "evaluation_summary.json"
    text = written.read_text(encoding="utf-8")
    summary = json.loads(text)
    assert text == json.dumps(summary, ensure_ascii=False, indent=2) + "\n"
    assert summary["tasks"][0]["passed"] is True
    console = {key: value for key, value in summary.items() if key != "tasks"}
    assert out == json.dumps(console, ensure_ascii=False, indent=2) + (
        f"\nSaved summary to: {written}\n"
    )


def test_cli_output_flag_and_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    predictions, gold, configs = _suite(tmp_path, {"task_1": ("v\nA\n", "v\nB\n")})
    output = tmp_path / "deep" / "summary.json"
    args = ["--prediction-root", str(predictions), "--gold-root", str(gold)]
    assert cli_main([*args, "--config-root", str(configs), "--output", str(output)]) == 0
    assert json.loads(output.read_text(encoding="utf-8"))["passed_task_count"] == 0
    assert not (predictions / "evaluation_summary.json").exists()
    capsys.readouterr()
    assert cli_main(args) == 2
    assert "--config-root" in capsys.readouterr().err


ENTRY = [sys.executable, "-m", "evaluator"]


def _roots(predictions: Path, gold: Path, configs: Path) -> list[str]:
    return [
        *("--prediction-root", str(predictions)),
        *("--gold-root", str(gold)),
        *("--config-root", str(configs)),
    ]


def test_python_dash_m_entry_point(tmp_path: Path) -> None:
    predictions, gold, configs = _suite(tmp_path, {"task_1": ("v\nA\n", "v\nA\n")})
    done = subprocess.run(
        [*ENTRY, *_roots(predictions, gold, configs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((predictions / "evaluation_summary.json").read_text())["task_accuracy"] == 1.0
    missing = subprocess.run(
        [*ENTRY, *_roots(tmp_path / "nope", gold, configs)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 2
    assert missing.stderr.startswith("Evaluator fatal error: Missing prediction root directory")
