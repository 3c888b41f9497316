"""A release in the official layout with unscored tasks, through the command line a user runs.

Twelve tasks, four with gold and config (the official release: 410 inputs, 60 scored).
``dataspace validate``, ``dataspace run`` (real local Ray, real local sandboxes, DataSpace-Agent
against the scripted model server, and the gold oracle), ``dataspace report`` and
``dataspace export`` each run as a subprocess; the bundle is scored again with
``python -m evaluator`` and must give the run's own scores.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dataspace.errors import ConfigError
from dataspace.runs.results import read_results
from dataspace.runs.spec import fingerprint
from dataspace.testing.releases import OFFICIAL_SCORED, write_official_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.ray, pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration]

KEY_ENV = "DATASPACE_OFFICIAL_TEST_KEY"
SECRET = "sk-official-7d41c0a9e2b84f6f9a03c5e1"  # a stand-in key that must never leak
RUN_ID = "official"
SCORED = [f"task_{k}" for k in OFFICIAL_SCORED]
UNSCORED = [f"task_{k}" for k in range(1, 13) if k not in OFFICIAL_SCORED]
COUNTS = "4 scored of 12 tasks, 8 unscored (no gold)"

# Every task but task_3 gets the same program: products above 20 units. That is the right
# answer for task_5 only (its threshold is 20), so the agent scores 1 of the 4 scored tasks.
_PROGRAM = (
    "import csv; r = list(csv.DictReader(open('/workspace/sales.csv', encoding='utf-8'))); "
    "w = csv.writer(open('/output/prediction.csv', 'w', newline='', encoding='utf-8')); "
    "w.writerow(['product', 'units']); "
    "[w.writerow([x['product'], x['units']]) for x in r if int(x['units']) > 20]"
)
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "*": [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls -R /workspace"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": f'python3 -c "{_PROGRAM}"'}}]},
        {
            "tool_calls": [
                {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}
            ]
        },
    ],
    "task_3": [],  # only text replies: the agent runs out of turns without submitting
}


@dataclass
class Official:
    root: Path
    release: Path
    store: Path
    run_dir: Path
    env: dict[str, str]
    validate: subprocess.CompletedProcess[str]
    run: subprocess.CompletedProcess[str]


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> Official:
    root = tmp_path_factory.mktemp("official")
    release = write_official_release(root / "release")
    env = {**os.environ, KEY_ENV: SECRET, "RAY_DEDUP_LOGS": "0"}
    validate = _cli("validate", str(release), env=env, cwd=root)
    with ScriptedServer(SCRIPTS) as srv:
        spec = {
            "run_id": RUN_ID,
            "release": "./release",
            "store": "./store",
            "agents": [
                {"name": "gold", "harness": "gold"},
                {
                    "name": "react",
                    "harness": "dataspace-agent",
                    "model": {"id": "scripted-model", "base_url": srv.url, "key_env": KEY_ENV},
                    "settings": {"retry": {"initial_backoff": 0.01, "max_backoff": 0.05}},
                },
            ],
            "limits": {"model_turns": 4, "wall_seconds": 120, "command_timeout": 30},
            "sandbox": {"backend": "local", "cpus": 1, "memory": "1GiB"},
            "concurrency": 2,
        }
        (root / "spec.json").write_text(json.dumps(spec))
        run = _cli("run", "spec.json", env=env, cwd=root)
    return Official(
        root=root,
        release=release,
        store=root / "store",
        run_dir=root / "store" / "runs" / RUN_ID,
        env=env,
        validate=validate,
        run=run,
    )


def _evaluate(predictions: Path, release: Path, out: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluator",
            "--prediction-root",
            str(predictions),
            "--gold-root",
            str(release / "output"),
            "--config-root",
            str(release / "evaluation" / "configs"),
            "--output",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def _export(official: Official, agent: str, out: Path, run: str | None = None) -> str:
    proc = _cli(
        "export",
        run or str(official.run_dir),
        "--agent",
        agent,
        "--out",
        str(out),
        env=official.env,
        cwd=official.root,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _rows(official: Official) -> dict[tuple[str, str], dict[str, Any]]:
    df = read_results((official.run_dir / "results.parquet").read_bytes())
    return {(r["agent"], r["task_id"]): r for r in df.to_dict("records")}


def test_validate_accepts_the_official_layout_and_says_the_counts(official):
    assert official.validate.returncode == 0, official.validate.stderr
    assert f"12 tasks, all valid; {COUNTS}" in official.validate.stdout
    strict = _cli(
        "validate", str(official.release), "--require-gold", env=official.env, cwd=official.root
    )
    assert strict.returncode == 2
    assert "output/task_1/gold.csv: gold answer is missing" in strict.stderr


def test_run_scores_gold_4_of_4_and_leaves_the_others_unscored(official):
    out = official.run.stdout
    assert official.run.returncode == 0, official.run.stderr
    assert f"tasks: {COUNTS}; 8 oracle attempts skipped (no gold to submit)" in out
    assert "gold: accuracy 100.00% (4/4)" in out
    assert "react: accuracy 25.00% (1/4)" in out

    rows = _rows(official)
    assert len(rows) == 24
    for t in SCORED:
        gold, react = rows[("gold", t)], rows[("react", t)]
        assert gold["status"] == "submitted" and gold["scored"] and gold["passed"] is True
        assert react["scored"] and react["passed"] is (t == "task_5")
        assert react["verdict"]["task_id"] == t
    for t in UNSCORED:
        gold, react = rows[("gold", t)], rows[("react", t)]
        assert gold["status"] == "skipped" and gold["scored"] is False
        assert gold["passed"] is None and "no gold answer" in gold["error"]
        # the agent really ran there: its attempt is stored, marked unscored, not failed
        assert react["scored"] is False and react["passed"] is None and react["verdict"] is None
        assert (official.run_dir / f"attempts/react/{t}/1/events.jsonl").is_file()
        assert not (official.run_dir / f"attempts/gold/{t}").exists()
    assert rows[("react", "task_3")]["status"] == "model_turns_exhausted"
    assert {rows[("react", t)]["status"] for t in UNSCORED if t != "task_3"} == {"submitted"}

    summary = json.loads((official.run_dir / "summary.json").read_text())
    assert (summary["tasks"], summary["scored_tasks"], summary["unscored_tasks"]) == (12, 4, 8)
    assert summary["agents"]["gold"]["scored"] == 4 and summary["agents"]["gold"]["unscored"] == 8
    assert summary["agents"]["react"]["accuracy"] == 0.25


def test_report_says_the_counts_in_markdown_and_html(official):
    out = official.root / "report"
    proc = _cli(
        "report", str(official.run_dir), "--out", str(out), env=official.env, cwd=official.root
    )
    assert proc.returncode == 0, proc.stderr
    assert f"note:     Run {RUN_ID}: {COUNTS}." in proc.stdout
    md = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert f"Run {RUN_ID}: {COUNTS}." in md
    assert f"Run {RUN_ID}: {COUNTS}." in html
    # the accuracy table: gold 4/4, react 1/4, and 8 unscored attempts each
    acc = (out / "report/tables/accuracy.csv").read_text().splitlines()
    head = acc[0].split(",")
    by_agent = {
        line.split(",")[0]: dict(zip(head, line.split(","), strict=True)) for line in acc[1:]
    }
    assert by_agent["gold"]["scored"] == "4" and by_agent["gold"]["correct"] == "4"
    assert by_agent["react"]["scored"] == "4" and by_agent["react"]["correct"] == "1"
    assert by_agent["gold"]["unscored"] == by_agent["react"]["unscored"] == "8"


def test_export_bundle_rescores_identically_with_the_official_cli(official):
    rows = _rows(official)
    spec_doc = json.loads((official.run_dir / "spec.json").read_text())
    for agent, passed in (("gold", 4), ("react", 1)):
        out = official.root / f"bundle-{agent}"
        screen = _export(official, agent, out)
        assert f"tasks: {COUNTS}" in screen
        assert f"scores: {passed}/4 scored tasks passed ({25 * passed:.2f}%)" in screen
        # the official batch layout: every task has its run folder; predictions/ only
        # holds submitted predictions
        assert sorted(p.name for p in (out / "tasks").iterdir()) == sorted(SCORED + UNSCORED)
        with_prediction = sorted(p.name for p in (out / "predictions").iterdir())
        submitted = [t for t in SCORED + UNSCORED if rows[(agent, t)]["status"] == "submitted"]
        assert with_prediction == sorted(submitted)
        manifest = json.loads((out / "export.json").read_text())
        missing = {m["task_id"]: m for m in manifest["missing_predictions"]}
        assert sorted(missing) == sorted(set(SCORED + UNSCORED) - set(submitted))
        if agent == "react":
            assert list(missing) == ["task_3"]
            assert missing["task_3"]["status"] == "model_turns_exhausted"
            trace = out / "tasks/task_3/run_1/events.jsonl"
            assert (
                trace.read_bytes()
                == (official.run_dir / "attempts/react/task_3/1/events.jsonl").read_bytes()
            )
        else:
            assert list(missing) == UNSCORED  # in task order
            assert {m["status"] for m in missing.values()} == {"skipped"}

        evaluated = _evaluate(out / "predictions", official.release, out.parent / f"{agent}.json")
        assert evaluated["task_count"] == 4 and evaluated["passed_task_count"] == passed
        assert {t["task_id"]: t["passed"] for t in evaluated["tasks"]} == {
            t: rows[(agent, t)]["passed"] for t in SCORED
        }
        assert evaluated["task_accuracy"] == manifest["scores"]["task_accuracy"]
        summary = json.loads((official.run_dir / "summary.json").read_text())
        assert evaluated["task_accuracy"] == summary["agents"][agent]["accuracy"]
        assert evaluated["unscored_prediction_tasks"] == [t for t in submitted if t in UNSCORED]
        # each verdict equals the one the run recorded
        for t in evaluated["tasks"]:
            assert t["error_code"] == rows[(agent, t["task_id"])]["verdict"]["error_code"]

        # identity: the run's fingerprint, and it is the hash of the recorded identity
        experiment = json.loads((out / "experiment.json").read_text())
        assert experiment["fingerprint"] == spec_doc["fingerprint"] == manifest["fingerprint"]
        assert fingerprint(experiment["identity"]) == experiment["fingerprint"]
        config = manifest["configuration"]
        assert config["agent"]["name"] == agent and config["limits"]["model_turns"] == 4
        # one runtime for every attempt, with the workbench manifest the sandbox recorded
        (runtime,) = config["runtime"]
        assert runtime["sandbox"]["backend"] == "local"
        assert runtime["manifest"] and "runtime_version" in json.dumps(runtime["manifest"])
        assert sorted(runtime["tasks"]) == sorted(SCORED if agent == "gold" else SCORED + UNSCORED)
        batch = json.loads((out / "batch_summary.json").read_text())
        assert batch["task_count"] == 12 and batch["pending_task_count"] == 0
        assert sum(batch["status_counts"].values()) == 12
        for name, digest in manifest["files"].items():
            assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name


def test_bundles_hold_no_credential(official):
    for agent in ("gold", "react"):
        out = official.root / f"bundle-secret-{agent}"
        _export(official, agent, out)
        files = [p for p in out.rglob("*") if p.is_file()]
        assert len(files) > 12
        for p in files:
            assert SECRET.encode() not in p.read_bytes(), p
        config = json.loads((out / "export.json").read_text())["configuration"]
        if agent == "react":
            assert config["agent"]["model"]["key_env"] == KEY_ENV  # the name, never the value


def test_export_refuses_a_run_whose_files_hold_a_credential(official, tmp_path):
    """Guards the bundle against a harness that leaked its key into a trace."""
    from dataspace.runs.export import export_bundle

    run = tmp_path / "store" / "runs" / RUN_ID
    shutil.copytree(official.run_dir, run)
    trace = run / "attempts/react/task_5/1/events.jsonl"
    trace.write_bytes(trace.read_bytes() + json.dumps({"leak": SECRET}).encode() + b"\n")
    with pytest.raises(ConfigError) as ei:
        export_bundle(str(run), agent="react", out=tmp_path / "b", environ={KEY_ENV: SECRET})
    assert "tasks/task_5/run_1/events.jsonl" in str(ei.value) and KEY_ENV in str(ei.value)
    assert SECRET not in str(ei.value)
    assert not (tmp_path / "b").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["store"]
    # an ordinary word in a variable named like a token ("submitted" is in every trace)
    # is not taken for a credential
    env = {KEY_ENV: SECRET, "UI_TOKEN_MODE": "submitted"}
    bundle = export_bundle(str(official.run_dir), agent="react", out=tmp_path / "ok", environ=env)
    assert len(bundle.predictions) == 11 and bundle.passed == 1


def test_export_errors_are_one_line_with_exit_2(official, tmp_path):
    bad = _cli(
        "export", str(official.run_dir), "--agent", "nobody", "--out", str(tmp_path / "b"),
        env=official.env, cwd=tmp_path,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    assert "no agent 'nobody' in this run (agents: gold, react)" in bad.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full/x").write_text("x")
    busy = _cli(
        "export", str(official.run_dir), "--agent", "gold", "--out", str(tmp_path / "full"),
        env=official.env, cwd=tmp_path,
    )  # fmt: skip
    assert busy.returncode == 2 and "already exists" in busy.stderr
    again = _cli(
        "export", str(official.run_dir), "--agent", "gold", "--attempt", "2", "--out",
        str(tmp_path / "b"), env=official.env, cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 2 and "has no attempt 2 (attempts: 1)" in again.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.s3
def test_export_from_an_s3_run_is_the_same_bundle(official, tmp_path):
    pytest.importorskip("moto")
    from dataspace.store import open_store
    from dataspace.testing import TEST_CREDENTIALS, create_bucket, moto_s3_server, s3_test_options

    local = official.root / "bundle-local"
    _export(official, "react", local)
    with moto_s3_server() as endpoint:
        create_bucket(endpoint, "bench")
        s3 = open_store("s3://bench/results", **s3_test_options(endpoint))
        for p in sorted(official.run_dir.rglob("*")):
            if p.is_file():
                s3.put_file(f"runs/{RUN_ID}/{p.relative_to(official.run_dir).as_posix()}", p)
        # the command line gives only the URI: endpoint and credentials from the environment
        env = {
            **official.env,
            "DATASPACE_S3_ENDPOINT": endpoint,
            "AWS_ACCESS_KEY_ID": TEST_CREDENTIALS["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": TEST_CREDENTIALS["secret_access_key"],
            "AWS_DEFAULT_REGION": TEST_CREDENTIALS["region"],
        }
        out = tmp_path / "bundle-s3"
        proc = _cli(
            "export", f"s3://bench/results/runs/{RUN_ID}", "--agent", "react", "--out", str(out),
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"tasks: {COUNTS}" in proc.stdout and "scores: 1/4 scored tasks passed" in proc.stdout

    def files(root: Path) -> dict[str, bytes]:
        return {
            p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
        }

    a, b = files(local), files(out)
    assert sorted(a) == sorted(b)
    volatile = {"export.json", "batch_summary.json"}  # export time and source URI
    assert {k for k in a if a[k] != b[k]} <= volatile
    ma, mb = json.loads(a["export.json"]), json.loads(b["export.json"])
    assert mb["source"] == f"s3://bench/results/runs/{RUN_ID}"
    for key in ("scores", "tasks", "configuration", "missing_predictions"):
        assert ma[key] == mb[key], key
    ma["files"].pop("batch_summary.json"), mb["files"].pop("batch_summary.json")
    assert ma["files"] == mb["files"]
    evaluated = _evaluate(out / "predictions", official.release, tmp_path / "s3.json")
    assert evaluated["passed_task_count"] == 1 and evaluated["task_count"] == 4


def test_export_of_a_task_selection_says_what_the_evaluator_will_count(
    official, ray_local, tmp_path
):
    """Guards a bundle of a partial run from being read as a full-release score."""
    from dataspace.runs.controller import execute_run
    from dataspace.runs.export import export_bundle
    from dataspace.runs.spec import AgentSpec, Limits, RunSpec, SandboxConfig

    spec = RunSpec(
        run_id="selection",
        release=str(official.release),
        store=f"file://{tmp_path / 'store'}",
        agents=(AgentSpec(name="gold", harness="gold"),),
        limits=Limits(memory_bytes=512 * 1024**2),
        sandbox=SandboxConfig(),
        tasks=("task_5", "task_6"),
    )
    outcome = execute_run(spec)
    assert outcome.summary["tasks"] == 2 and outcome.summary["scored_tasks"] == 1
    bundle = export_bundle(
        str(tmp_path / "store/runs/selection"), agent="gold", out=tmp_path / "b", environ={}
    )
    assert bundle.tasks == ("task_5", "task_6") and bundle.predictions == ("task_5",)
    assert bundle.passed == 1 and bundle.accuracy == 1.0
    assert any("selection of the release's tasks" in line for line in bundle.describe())
    # the official count: every config of the release, the three outside the run missing
    evaluated = _evaluate(tmp_path / "b/predictions", official.release, tmp_path / "e.json")
    assert (evaluated["task_count"], evaluated["passed_task_count"]) == (4, 1)
    missing = {t["task_id"] for t in evaluated["tasks"] if t["error_code"] == "missing_prediction"}
    assert missing == {"task_2", "task_8", "task_11"}
