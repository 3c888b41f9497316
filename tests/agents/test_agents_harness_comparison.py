"""The paper's harness comparison: its example spec, and a real run over the demo release.

The run goes through the controller on a local Ray instance with every installed harness
(DataSpace-Agent and smolagents on Chat Completions, the real Codex on the Responses API,
the real Claude Code on the Messages API, Grok Build when the user installed it), all with
the same model id, each against its wire API's scripted server, over three tasks of the
bundled demo release (built once a session, ``tests/conftest.py``); then ``build_report``
writes the section comparing the harnesses with the backbone fixed, whose figures are
checked against the results rows. The Codex and Claude Code attempts are the acceptance
of the native CLIs on the demo release: each starts with a probe the CLI itself runs in
the sandbox (the key searched for in every environment and file, a listener on the host's
127.0.0.1, a write to the workspace).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from agents_helpers import KEY_ENV, SECRET, bash, counting_listener, submit

from dataspace.agents.native.install import PINS, harness_state
from dataspace.errors import ConfigError
from dataspace.release import Release
from dataspace.runs.spec import load_spec, parse_spec
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


HALF = len(SECRET) // 2
NATIVE = ("codex", "claude-code")
PROBE_OK = "PROBE key_hits=0 host_net=refused workspace=readonly"


def _rows(gold: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(gold.decode())))


def _probe(port: int) -> str:
    """The probe command (the key is assembled from halves: it never appears in a script)."""
    return (
        f"A='{SECRET[:HALF]}'; B='{SECRET[HALF:]}'; k=\"$A$B\"; "
        "n1=$( (env; cat /proc/[0-9]*/environ | tr '\\0' '\\n') 2>/dev/null | grep -cF \"$k\"); "
        'n2=$(grep -rlF "$k" /output /tmp /run /workspace 2>/dev/null | wc -l); '
        'net=$(python3 -c "import socket; s=socket.socket(); s.settimeout(5)\n'
        "try:\n    s.connect(('127.0.0.1', " + str(port) + "))\n    print('open')\n"
        "except OSError:\n    print('refused')\"); "
        "ws=$( (echo x > /workspace/probe) 2>/dev/null && echo writable || echo readonly); "
        'echo "PROBE key_hits=$((n1 + n2)) host_net=$net workspace=$ws"'
    )


def _scripts(
    release: Path, tasks: tuple[str, ...], harness: str, port: int
) -> dict[str, list[dict[str, Any]]]:
    rel = Release(release)
    out = {}
    for t in tasks:
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
            out[t] = [
                {"shell": _probe(port)},
                {"shell": f"{write} && head -3 /output/prediction.csv"},
                {"content": "prediction.csv is written."},
            ]
    # DataSpace-Agent submits a wrong answer on the last task, so the figures differ
    if harness == "dataspace-agent":
        header = _rows(rel.gold_path(tasks[-1]).read_bytes())[0]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([header, ["not the answer"] * len(header)])
        wrong = base64.b64encode(buf.getvalue().encode()).decode()
        cmd = f"echo {wrong} | base64 -d > /output/prediction.csv"
        out[tasks[-1]] = [{"tool_calls": [bash(cmd)]}, {"tool_calls": [submit()]}]
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


@pytest.fixture(scope="module")
def host_listener() -> Iterator[dict[str, Any]]:
    """A TCP listener on the host's 127.0.0.1 that counts the connections it accepts."""
    with counting_listener() as seen:
        yield seen


def _installed() -> list[str]:
    """The harnesses of the comparison: every one but a native CLI that is not installed
    (the set-up installs smolagents, Codex and Claude Code; Grok Build is the user's)."""
    return [h for h in HARNESSES if h not in PINS or harness_state(h).ready]


@pytest.fixture(scope="module")
def comparison(
    local_backend: Any,
    ray_here: Any,
    demo_release: Path,
    demo_tasks: tuple[str, ...],
    host_listener: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """One comparison run over three demo tasks, and its report."""
    from dataspace.report.build import build_report
    from dataspace.runs.controller import execute_run

    installed = _installed()
    if not set(NATIVE) <= set(installed):
        pytest.skip(f"Codex and Claude Code are not both installed (installed: {installed})")
    kinds = {"codex": ScriptedResponsesServer, "claude-code": ScriptedMessagesServer}
    port = host_listener["port"]
    # the scripts are per task id, so each harness gets its own server of its wire API
    per = {
        h: kinds.get(h, ScriptedServer)(_scripts(demo_release, demo_tasks, h, port))
        for h in installed
    }
    for srv in per.values():
        srv.start()
    store = tmp_path_factory.mktemp("comparison") / "store"
    try:
        obj = {
            "run_id": "harnesses",
            "release": str(demo_release),
            "store": str(store),
            "tasks": list(demo_tasks),
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
    report = build_report([str(store / "runs" / "harnesses")], traces="none")
    return {
        "installed": installed,
        "tasks": demo_tasks,
        "servers": per,
        "rows": outcome.rows,
        "store": store,
        "report": report,
    }


def run_marks(test: Any) -> Any:
    """The marks of the tests that read the comparison run."""
    for mark in (
        pytest.mark.sandbox,
        pytest.mark.llm,
        pytest.mark.ray,
        pytest.mark.slow,
        pytest.mark.integration,
        pytest.mark.timeout(1800),  # the first user of the demo release builds it
    ):
        test = mark(test)
    return test


@run_marks
@pytest.mark.parametrize("harness", NATIVE)
def test_the_real_cli_solves_three_demo_tasks(
    comparison: dict[str, Any], harness: str, host_listener: dict[str, Any]
) -> None:
    """The pinned Codex and Claude Code binaries, in the local sandbox, score correct on
    three demo tasks; the probe each CLI ran shows no key, no host network, no workspace
    write; the relay's token sums equal what the scripted server reported."""
    srv = comparison["servers"][harness]
    by = {r["task_id"]: r for r in comparison["rows"] if r["agent"] == harness}
    assert set(by) == set(comparison["tasks"])
    for t, row in by.items():
        assert (row["status"], row["passed"]) == ("submitted", True), row
        rep = srv.totals(t)
        assert rep.replies == 3
        assert (
            row["input_tokens"],
            row["cached_input_tokens"],
            row["output_tokens"],
            row["reasoning_tokens"],
        ) == (rep.prompt_tokens, rep.cached_tokens, rep.completion_tokens, rep.reasoning_tokens)
        assert row["model_calls"] == 3 and row["tool_actions"] == 2
        adir = comparison["store"] / "runs" / "harnesses" / "attempts" / harness / t / "1"
        trace = (adir / "events.jsonl").read_text()
        assert SECRET not in trace and SECRET not in (adir / "run.json").read_text()
        assert PROBE_OK in trace, t
        events = [json.loads(line) for line in trace.splitlines()]
        start = next(e for e in events if e["type"] == "agent_start")
        assert start["version"] == PINS[harness].version
        assert start["harness_config"]["boundary"] == "dataspace sandbox"
        calls = [e for e in events if e["type"] == "model_call"]
        assert len(calls) == 3 and all(c["model"] == "backbone-model" for c in calls)
        assert all(c["raw"] for c in calls)  # the raw stream is the trace
    assert host_listener["accepted"] == 0
    # every call reached the endpoint with the real key (added host-side) and only the
    # backbone's name, and no web tool was ever offered to the model
    for req in srv.requests:
        low = {k.lower(): v for k, v in req.headers.items()}
        assert SECRET in (low.get("authorization", "") + low.get("x-api-key", ""))
        assert req.body["model"] == "backbone-model"
        names = {str(t.get("name") or t.get("type")) for t in req.body.get("tools") or []}
        assert not names & {"web_search", "web_search_preview", "WebSearch", "WebFetch"}, names


@run_marks
def test_the_harness_section_is_the_results_rows(comparison: dict[str, Any]) -> None:
    """Each figure of the section equals what the results rows give, harness by harness."""
    import pandas as pd

    rows = comparison["rows"]
    installed = comparison["installed"]
    results = pd.read_parquet(comparison["store"] / "runs" / "harnesses" / "results.parquet")
    assert len(results) == len(rows) == len(installed) * 3  # no attempt lost or counted twice
    table = comparison["report"].data["harnesses"]
    assert set(table["harness"]) == set(installed) and set(table["model"]) == {"backbone-model"}
    md = Path(comparison["report"].markdown.removeprefix("file://")).read_text()
    section = md.split("## Harnesses with the backbone fixed", 1)[1].split("\n## ", 1)[0]
    for h in installed:
        mine = [r for r in rows if r["agent"] == h]
        got = table[table["harness"] == h].iloc[0]
        correct = sum(1 for r in mine if r["passed"] is True)
        scored = sum(1 for r in mine if r["passed"] is not None)
        assert (int(got["correct"]), int(got["scored"])) == (correct, scored)
        assert got["accuracy_pct"] == pytest.approx(100.0 * correct / scored)
        for kind in ("input", "cached_input", "output", "reasoning"):
            mean = sum(r[f"{kind}_tokens"] for r in mine) / len(mine)
            assert got[f"{kind}_tokens_mean"] == pytest.approx(mean), (h, kind)
        assert got["cost_per_task_usd"] == pytest.approx(sum(r["cost_usd"] for r in mine) / 3)
        assert got["latency_mean_s"] == pytest.approx(sum(r["wall_seconds"] for r in mine) / 3)
        states = Counter(r["status"] for r in mine)
        want = ", ".join(
            f"{k} {v}" for k, v in sorted(states.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        assert got["end_states"] == want
        line = next(ln for ln in section.splitlines() if f"| {h} " in ln)
        assert f"{100.0 * correct / scored:.2f}" in line and want in line, line
        # tokens as the scripted servers reported them (preflight's probe names no task)
        srv = comparison["servers"][h]
        assert sum(r["input_tokens"] for r in mine) == sum(
            srv.totals(t).prompt_tokens for t in comparison["tasks"]
        )
    acc = dict(zip(table["harness"], table["accuracy_pct"], strict=True))
    assert acc["dataspace-agent"] == pytest.approx(200 / 3)  # the one wrong answer
    assert all(acc[h] == 100.0 for h in NATIVE)
    html = Path(comparison["report"].html.removeprefix("file://")).read_text()
    assert 'id="harnesses"' in html


@run_marks
def test_smolagents_and_dataspace_agent_run_in_the_comparison(comparison: dict[str, Any]) -> None:
    """smolagents (from its own install) solves the three tasks; DataSpace-Agent the two
    it is scripted to."""
    from dataspace.agents.smolagents_adapter import install_problem

    assert install_problem() is None, install_problem()
    rows = comparison["rows"]
    smol = {r["task_id"]: r for r in rows if r["agent"] == "smolagents"}
    assert len(smol) == 3
    for r in smol.values():
        assert (r["status"], r["passed"]) == ("submitted", True), (r["task_id"], r.get("error"))
    agent = {r["task_id"]: r for r in rows if r["agent"] == "dataspace-agent"}
    last = comparison["tasks"][-1]
    assert [agent[t]["passed"] for t in comparison["tasks"]] == [True, True, False]
    assert agent[last]["status"] == "submitted"
