"""Intervals, pairwise comparisons, groups and per-task agreement, through ``dataspace report``
and ``dataspace plan`` as a user runs them on stored runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from dataspace import stats
from dataspace.runs.controller import summarize
from dataspace.runs.spec import load_spec
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.synthetic import SyntheticAgent, default_agents, write_synthetic_run


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def store_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp-store")
    store = open_store(str(root), fsync=False)
    write_synthetic_run(store, "six", agents=default_agents(6), tasks=30, attempts=2, seed=3)
    write_synthetic_run(
        store,
        "few",
        agents=[SyntheticAgent(name="late", model="other/model", skill=0.4)],
        tasks=12,
        seed=4,
    )
    return root


def test_report_at_a_chosen_level_carries_intervals_pairs_groups_and_agreement(
    store_root, tmp_path
):
    out = tmp_path / "out"
    p = _cli(
        "report",
        str(store_root / "runs/six"),
        "--out",
        str(out),
        "--traces",
        "none",
        "--level",
        "0.9",
    )
    assert p.returncode == 0, p.stderr
    assert "Intervals are 90%" in p.stdout
    tables = out / "report" / "tables"
    acc = pd.read_csv(tables / "accuracy.csv")
    for r in acc.itertuples():
        iv = stats.wilson(int(r.correct), int(r.scored), 0.9)
        assert r.accuracy_low_pct == pytest.approx(100 * iv.low)
        assert r.accuracy_high_pct == pytest.approx(100 * iv.high)
        wide = stats.wilson(int(r.correct), int(r.scored), 0.95)
        assert 100 * wide.low < r.accuracy_low_pct  # 90% is narrower than 95%
    assert acc["group"].str.fullmatch("[a-z]+").all()
    pairs = pd.read_csv(tables / "pairwise.csv")
    assert len(pairs) == 15 and (pairs["shared_tasks"] == 30).all()
    assert pairs["p_holm"].ge(pairs["p_mcnemar"]).all()
    eff = pd.read_csv(tables / "efficiency.csv")
    for col in ("tokens_mean", "cost_per_task_usd", "latency_mean_s", "tool_actions_mean"):
        assert (eff[f"{col}_low"] <= eff[col]).all() and (eff[col] <= eff[f"{col}_high"]).all()
    pk = pd.read_csv(tables / "pass_at_k.csv")
    assert {"pass@2_low_pct", "pass@2_high_pct", "pass^2_pct"} <= set(pk.columns)
    assert (pk["pass^2_pct"] <= pk["pass@1_pct"] + 1e-9).all()
    harn = pd.read_csv(tables / "harnesses.csv")
    assert harn["group"].str.fullmatch("[a-z]+").all()
    hp = pd.read_csv(tables / "harness_pairs.csv")
    assert set(hp["model"]) == set(harn["model"])
    per = pd.read_csv(tables / "per_task.csv")
    agree = pd.read_csv(tables / "attempt_agreement.csv")
    assert per["attempts_disagree"].sum() == agree["tasks_attempts_disagree"].sum() > 0
    unsolved = pd.read_csv(tables / "unsolved.csv")
    assert set(unsolved["task_id"]) == set(per.loc[per["solved_by"] == 0, "task_id"])
    md = (out / "report.md").read_text()
    assert "## Which differences are real (90%)" in md
    assert "## Tasks no agent solved" in md


def test_mixed_task_sets_are_compared_on_their_intersection(store_root, tmp_path):
    out = tmp_path / "out"
    p = _cli(
        "report",
        str(store_root / "runs/six"),
        str(store_root / "runs/few"),
        "--out",
        str(out),
        "--traces",
        "none",
    )
    assert p.returncode == 0, p.stderr
    pairs = pd.read_csv(out / "report/tables/pairwise.csv")
    with_late = pairs[(pairs["a"] == "late") | (pairs["b"] == "late")]
    assert len(with_late) == 6 and (with_late["shared_tasks"] == 12).all()
    assert (pairs.drop(with_late.index)["shared_tasks"] == 30).all()
    assert "compared on the scored tasks both ran (from 12 to 30 tasks per pair" in p.stdout


def test_a_bad_level_is_one_line_naming_the_flag(store_root):
    p = _cli("report", str(store_root / "runs/six"), "--traces", "none", "--level", "95")
    assert p.returncode == 2
    assert p.stderr.strip().endswith(
        "--level: level 95.0: give a confidence level between 0 and 1, e.g. 0.95"
    )


def test_plan_prints_the_attempts_needed_to_tell_two_agents_apart(store_root, tmp_path):
    release = write_tiny_release(tmp_path / "release", tasks=4)
    spec = tmp_path / "s.yaml"
    agents = [
        {
            "name": n,
            "harness": "dataspace-agent",
            "model": {
                "id": m,
                "base_url": "http://127.0.0.1:9/v1",
                "key_env": "NO_KEY",
                "prices": {"input": 1.0, "cached_input": 0.1, "output": 4.0},
            },
        }
        for n, m in (("m1", "example/model-1"), ("m2", "example/model-2"))
    ]
    spec.write_text(
        yaml.safe_dump(
            {
                "run_id": "next",
                "release": str(release),
                "store": str(store_root),
                "agents": agents,
                "concurrency": 2,
                "attempts": 2,
            }
        )
    )
    p = _cli("plan", str(spec), "--difference", "10")
    assert p.returncode == 0, p.stderr
    assert "m1 (dataspace-agent, example/model-1): 8 attempts" in p.stdout
    assert "from history: 60 earlier attempts of example/model-1" in p.stdout
    line = next(ln for ln in p.stdout.splitlines() if "to tell m1 from m2" in ln)
    assert "by 10.0 points" in line and "on 30 shared tasks" in line
    assert "1 x " in line and "5 x " in line


def test_summary_json_carries_intervals(tmp_path):
    """Guards summary.json: each agent's accuracy and per-attempt means with their bounds."""
    release = write_tiny_release(tmp_path / "release", tasks=2)
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(
        yaml.safe_dump(
            {
                "run_id": "r",
                "release": str(release),
                "store": str(tmp_path / "st"),
                "agents": [{"name": "gold", "harness": "gold"}],
            }
        )
    )
    spec = load_spec(spec_path)
    rows = [
        {
            "key": f"k{i}",
            "agent": "gold",
            "task_id": f"task_{i % 4}",
            "status": "submitted",
            "passed": i % 3 != 0,
            "scored": True,
            "cost_usd": 0.01 * i,
            "input_tokens": 100 * i,
            "output_tokens": 10,
            "wall_seconds": 1.0 + i,
        }
        for i in range(12)
    ]
    s = summarize(spec, rows, wall_seconds=10.0)
    a = s["agents"]["gold"]
    iv = stats.wilson(8, 12)
    assert s["interval_level"] == 0.95
    assert a["accuracy_interval"] == [pytest.approx(iv.low), pytest.approx(iv.high)]
    c = a["cost_per_attempt_usd"]
    assert c["mean"] == pytest.approx(0.055)
    assert c["low"] <= c["mean"] <= c["high"]
    assert a["latency_per_attempt_s"]["mean"] == pytest.approx(6.5)
    json.dumps(s)
