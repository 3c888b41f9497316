"""The paper's harness comparison: its example spec, and a real run producing the report.

The run goes through the controller on a local Ray instance with every installed harness
(DataSpace-Agent and smolagents on Chat Completions, Codex on the Responses API, Claude
Code on the Messages API, Grok Build when the user installed it), all with the same model
id, each against its wire API's scripted server, over a three-task release; then
``build_report`` writes the section comparing the harnesses with the backbone fixed.
"""

from __future__ import annotations

import base64
import csv
import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from agents_helpers import KEY_ENV, SECRET, bash, submit

from dataspace.agents.native.install import PINS, harness_state
from dataspace.errors import ConfigError
from dataspace.release import Release
from dataspace.runs.spec import load_spec, parse_spec
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.testing.scripted_wire import ScriptedMessagesServer, ScriptedResponsesServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "paper-harnesses.yaml"
HARNESSES = ["dataspace-agent", "smolagents", "codex", "claude-code", "grok-build"]


def _filled() -> str:
    text = EXAMPLE.read_text()
    text = text.replace('"FILL_IN: GATEWAY_BASE_URL"', '"http://127.0.0.1:1/v1"')
    text = re.sub(r'"FILL_IN: gateway model id for ([^"]+)"', r'"vendor/\1"', text)
    return text.replace('"FILL_IN"', "1.0")


def test_the_example_is_refused_until_filled_in():
    with pytest.raises(ConfigError, match=r"agents\[0\]\.model\.[a-z_.]+: .* is a placeholder"):
        load_spec(EXAMPLE)


def test_the_filled_in_example_is_the_papers_setup(tmp_path):
    from dataspace.runs.controller import check_agents

    spec = parse_spec(yaml.safe_load(_filled()), source="example", base_dir=tmp_path)
    assert [a.harness for a in spec.agents] == HARNESSES
    assert len({a.model for a in spec.agents}) == 1  # one backbone for all five
    lim = spec.limits
    assert (lim.wall_seconds, lim.model_turns, lim.tool_actions) == (1800, 1000000, 1000000)
    check_agents(spec)


def _rows(gold: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(gold.decode())))


def _scripts(release: Path, harness: str) -> dict[str, list[dict[str, Any]]]:
    rel = Release(release)
    out = {}
    for t in rel.task_ids():
        gold = rel.gold_path(t).read_bytes()
        enc = base64.b64encode(gold).decode()
        write = f"echo {enc} | base64 -d > /output/prediction.csv"
        if harness == "dataspace-agent":
            out[t] = [{"tool_calls": [bash(write)]}, {"tool_calls": [submit()]}]
        elif harness == "smolagents":
            rows = _rows(gold)
            code = (
                "Thought: write it\n<code>\nimport pandas as pd\n"
                f"pd.DataFrame({rows[1:]!r}, columns={rows[0]!r})"
                ".to_csv('/output/prediction.csv', index=False)\nfinal_answer('done')\n</code>"
            )
            out[t] = [{"content": code}]
        else:
            out[t] = [{"shell": "ls /workspace"}, {"shell": write}, {"content": "done"}]
    # one task left without an answer, so the end states differ
    if harness in ("codex", "claude-code"):
        out["task_3"] = [{"content": "I could not find it."}]
    return out


@pytest.fixture(scope="module")
def ray_here():
    ray = pytest.importorskip("ray")
    os.environ[KEY_ENV] = SECRET
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.mark.sandbox
@pytest.mark.llm
@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.integration
def test_harness_comparison_run_produces_the_report_section(local_backend, ray_here, tmp_path):
    pytest.importorskip("smolagents", reason="smolagents is not installed")
    from dataspace.report.build import build_report
    from dataspace.runs.controller import execute_run

    release = write_tiny_release(tmp_path / "release")
    for p in [release, *release.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    installed = [h for h in HARNESSES if h not in PINS or harness_state(h).ready]
    kinds = {"codex": ScriptedResponsesServer, "claude-code": ScriptedMessagesServer}
    # the scripts are per task id, so each harness gets its own server of its wire API
    per = {h: kinds.get(h, ScriptedServer)(_scripts(release, h)) for h in installed}
    for srv in per.values():
        srv.start()
    try:
        obj = {
            "run_id": "harnesses",
            "release": str(release),
            "store": str(tmp_path / "store"),
            "agents": [
                {
                    "name": h,
                    "harness": h,
                    "model": {
                        "id": "backbone-model",
                        "base_url": per[h].url,
                        "key_env": KEY_ENV,
                        "prices": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
                    },
                }
                for h in installed
            ],
            "limits": {
                "model_turns": 1000000,
                "tool_actions": 1000000,
                "wall_seconds": 300,
                "command_timeout": 300,
            },
            "sandbox": {"backend": "local", "cpus": 2, "memory": "4GiB", "pids": 512},
            "concurrency": 2,
        }
        outcome = execute_run(parse_spec(obj, source="test"))
    finally:
        for srv in per.values():
            srv.stop()
    rows = outcome.rows
    by = {(r["agent"], r["task_id"]): r for r in rows}
    for h in installed:
        for t in ("task_1", "task_2"):
            assert by[(h, t)]["status"] == "submitted" and by[(h, t)]["passed"], by[(h, t)]
        tasks = ("task_1", "task_2", "task_3")
        tokens = sum(by[(h, t)]["input_tokens"] for t in tasks)
        # the tasks' scripts only: preflight's one probe call names no task
        assert tokens == sum(per[h].totals(t).prompt_tokens for t in tasks)
    for h in ("codex", "claude-code"):
        if h in installed:
            assert by[(h, "task_3")]["status"] == "no_prediction"
    report = build_report([str(tmp_path / "store" / "runs" / "harnesses")], traces="none")
    md = Path(report.markdown.removeprefix("file://")).read_text()
    assert "## Harnesses with the backbone fixed" in md
    table = report.data["harnesses"]
    assert list(table["harness"]) and set(table["harness"]) == set(installed)
    assert set(table["model"]) == {"backbone-model"}
    states = dict(zip(table["harness"], table["end_states"], strict=True))
    if "codex" in installed:
        assert states["codex"] == "submitted 2, no_prediction 1"
    assert states["dataspace-agent"] == "submitted 3"
    acc = dict(zip(table["harness"], table["accuracy_pct"], strict=True))
    assert acc["dataspace-agent"] == 100.0
    if "claude-code" in installed:
        assert acc["claude-code"] == pytest.approx(200 / 3)
    html = Path(report.html.removeprefix("file://")).read_text()
    assert 'id="harnesses"' in html
