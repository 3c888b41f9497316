"""``dataspace plan`` and the estimate a run records, against scripted runs with known usage.

The scripted server replies with known token counts (different per task) after a known
latency; the model id names one of the paper's backbones, so the first plan comes from the
paper's figures and the second from the first run.
"""

from __future__ import annotations

import json
import shutil

import pytest
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec

from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
    pytest.mark.ray,
    pytest.mark.slow,
]

MODEL = "gpt-5.6-sol"  # the paper's GPT-5.6 Sol


def _scripts() -> dict:
    def step(prompt: int, cached: int, out: int, delay: float) -> dict:
        usage = {"prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": out}
        return {"content": "thinking", "usage": usage, "delay": delay}

    # known latencies, different per task (2, 4 and 6 s a call): the attempts' spread is the
    # tasks', not the machine's load, and the longest attempt (12 s) is past the paper's least
    return {
        "*": [step(100, 0, 10, 0.0)],
        "task_1": [step(20_000, 5_000, 900, 2.0), step(24_000, 18_000, 1_200, 2.0)],
        "task_2": [step(30_000, 0, 1_500, 4.0), step(33_000, 25_000, 700, 4.0)],
        "task_3": [step(12_000, 8_000, 400, 6.0), step(15_000, 10_000, 2_000, 6.0)],
    }


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _plan(store, run_id):
    return json.loads((store / "runs" / run_id / "plan.json").read_text())


def _actual(store, run_id):
    return json.loads((store / "runs" / run_id / "summary.json").read_text())


def _within(q, value):
    eps = 1e-9 * max(1.0, abs(q["high"]))
    return q["low"] - eps <= value <= q["high"] + eps


def test_plan_estimates_are_within_range_of_scripted_runs_and_learn_from_history(tmp_path, ray_dir):
    """Guards the plan: paper-based first, history-based second, actual cost and wall in range."""
    release = write_tiny_release(tmp_path / "release", tasks=3)
    store = tmp_path / "store"
    env = cli_env(ray_dir, **{KEY_ENV: SECRET})
    # the paper's GPT-5.6 Sol attempts take about 10 s at the least: the three attempts at once,
    # the longest 12 s, keep this run's wall time inside the paper's range on any machine
    with ScriptedServer(_scripts()) as srv:
        agent = model_agent(srv.url, model_id=MODEL)
        spec = write_spec(tmp_path / "s.yaml", release, store, [agent], concurrency=3)

        before = dataspace("plan", str(spec), env=env)
        assert before.returncode == 0, before.stderr
        assert "react (dataspace-agent, gpt-5.6-sol): 3 attempts" in before.stdout
        assert "from paper: the paper's GPT-5.6 Sol" in before.stdout
        assert "cost $" in before.stdout and "wall time" in before.stdout
        assert not srv.requests  # planning calls no model

        first = dataspace("run", str(spec), env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "plan for run r1" in first.stdout and "from paper" in first.stdout
        plan1, s1 = _plan(store, "r1"), _actual(store, "r1")
        assert plan1["agents"][0]["source"] == "paper"
        cost1 = s1["agents"]["react"]["cost_usd"]
        assert _within(plan1["cost_usd"], cost1), (plan1["cost_usd"], cost1)
        assert _within(plan1["wall_seconds"], s1["wall_seconds"]), (plan1, s1["wall_seconds"])

        spec2 = write_spec(
            tmp_path / "s2.yaml", release, store, [agent], run_id="r2", concurrency=3
        )
        plan_cli = dataspace("plan", str(spec2), env=env)
        assert plan_cli.returncode == 0, plan_cli.stderr
        assert (
            "from history: 3 earlier attempts of gpt-5.6-sol under dataspace-agent in "
            "run(s) r1" in plan_cli.stdout
        )
        second = dataspace("run", str(spec2), env=env)
        assert second.returncode == 0, second.stdout + second.stderr
    plan2, s2 = _plan(store, "r2"), _actual(store, "r2")
    assert s2["interval_level"] == 0.95 and s2["agents"]["react"]["accuracy_interval"] is not None
    cost_iv = s2["agents"]["react"]["cost_per_attempt_usd"]
    assert cost_iv["low"] <= cost_iv["mean"] <= cost_iv["high"]
    assert plan2["agents"][0]["source"] == "history"
    cost2 = s2["agents"]["react"]["cost_usd"]
    # the scripted usage repeats: history predicts the cost exactly, inside its range
    assert plan2["cost_usd"]["estimate"] == pytest.approx(cost2, rel=1e-9)
    assert _within(plan2["cost_usd"], cost2)
    assert plan2["cost_usd"]["high"] - plan2["cost_usd"]["low"] > 0  # tasks differ
    assert _within(plan2["wall_seconds"], s2["wall_seconds"]), (plan2, s2["wall_seconds"])
    # three attempts seen, three to run: the token estimate is the first run's own total
    assert plan2["input_tokens"]["estimate"] == pytest.approx(
        20_000 + 24_000 + 30_000 + 33_000 + 12_000 + 15_000
    )

    rep = dataspace("report", str(store / "runs" / "r2"), "--traces", "none", env=cli_env())
    assert rep.returncode == 0, rep.stderr
    html = (store / "runs/r2/report.html").read_text()
    assert 'id="estimates"' in html and "from history" in html
    assert ">NO<" not in html.split('id="estimates"')[1].split("</table>")[0]


def test_plan_rejects_a_bad_level_in_one_line(tmp_path):
    release = write_tiny_release(tmp_path / "release", tasks=1)
    spec = write_spec(
        tmp_path / "s.yaml", release, tmp_path / "store", [model_agent("http://127.0.0.1:9/v1")]
    )
    p = dataspace("plan", str(spec), "--level", "95", env=cli_env())
    assert p.returncode == 2
    assert p.stderr.strip() == "error: --level 95.0: give a level between 0 and 1, e.g. 0.95"
