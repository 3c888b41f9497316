"""smolagents from its own install folder, not the controller's, not the workbench Python's.

The workbench Python (the agent's ``python3``, at ``/usr/local`` inside the local sandbox)
is built from ``images/runtime-requirements.txt`` alone, as the official workbench image
is. smolagents and its OpenAI client live in a folder of their own, built from
``images/smolagents-requirements.txt`` with ``--no-deps --target`` (``scripts/dev.sh``
here, the runtime image the same way), bound read-only into smolagents' attempts only.
These tests check both environments against their lists, that neither an agent's
``python3`` nor a code action's child process can import smolagents, and run the harness
from its folder against the scripted server.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from agents_helpers import CITIES, SECRET, model_for, workspace

from dataspace.agents import AgentContext, AgentLimits, get_agent
from dataspace.agents.smolagents_adapter import SANDBOX_SITE, install_problem
from dataspace.release import TaskInput
from dataspace.testing.scripted_server import ScriptedServer
from dataspace.traces import EventLog

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration]

IMAGES = Path(__file__).parents[2] / "images"
REQUIREMENTS = IMAGES / "runtime-requirements.txt"
HARNESS_REQUIREMENTS = IMAGES / "smolagents-requirements.txt"
WRITE = (
    "Thought: write the answer\n<code>\nimport pandas as pd, pathlib, subprocess\n"
    "df = pd.read_csv('/workspace/cities.csv')\n"
    "df[df['population'] > 250000][['city', 'population']]"
    ".to_csv('/output/prediction.csv', index=False)\n"
    "child = subprocess.run(['python3', '-c', 'import smolagents'], capture_output=True)\n"
    "pathlib.Path('/output/child.txt').write_text(str(child.returncode))\n"
    "final_answer('done')\n</code>"
)
VERSIONS = (
    "import json, importlib.metadata as m, sys; "
    "kw = {'path': sys.argv[1:]} if sys.argv[1:] else {}; "
    "print(json.dumps({'prefix': sys.prefix, "
    "'versions': {d.metadata['Name'].lower().replace('_', '-'): d.version "
    "for d in m.distributions(**kw)}}))"
)


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-").replace(".", "-")] = version
    return pins


def _norm(found: dict[str, str]) -> dict[str, str]:
    return {k.replace(".", "-"): v for k, v in found.items()}


def test_the_lists_are_disjoint_and_smolagents_is_not_a_workbench_package():
    workbench, harness = _pins(REQUIREMENTS), _pins(HARNESS_REQUIREMENTS)
    assert harness["smolagents"] == "1.26.0"
    assert not {"smolagents", "openai", "huggingface-hub"} & set(workbench)
    assert not set(workbench) & set(harness), "a package listed twice"


def test_smolagents_runs_from_its_own_folder(local_backend, tmp_path):
    from dataspace.sandbox import Limits, SandboxSpec

    problem = install_problem()
    if problem is not None:
        pytest.fail(f"the set-up installs the smolagents harness: {problem}")
    agent = get_agent("smolagents")
    needs = agent.sandbox_needs()
    sb = local_backend.create(
        SandboxSpec(
            workspace=workspace(tmp_path, {"cities.csv": CITIES}),
            limits=Limits(wall_seconds=400, memory_bytes=2 * 1024**3),
            runtime_binds=tuple(needs.runtime_binds),
        )
    )
    events = EventLog(tmp_path / "events.jsonl")
    try:
        python = sb.exec(["python3", "-c", VERSIONS])
        site = sb.exec(["python3", "-c", VERSIONS, SANDBOX_SITE])
        plain = sb.exec(["python3", "-c", "import smolagents"])
        listing = sb.exec(["ls", "-A", "/opt/dataspace"])
        assert python.exit_code == 0 and site.exit_code == 0, python.stderr + site.stderr
        with ScriptedServer({"task_1": [{"content": WRITE}]}) as srv:
            ctx = AgentContext(
                task=TaskInput(task_id="task_1", question="Which cities?"),
                sandbox=sb,
                limits=AgentLimits(wall_seconds=240),
                events=events,
                deadline=time.monotonic() + 240,
                settings={"model": model_for(srv)},
            )
            result = agent.run(ctx)
        prediction = sb.read_file("/output/prediction.csv").decode()
        child = sb.read_file("/output/child.txt").decode()
    finally:
        events.close()
        sb.close()
    # the agent's python3 is the workbench's, holding exactly its list's pins, no smolagents
    found = json.loads(python.stdout)
    assert found["prefix"] == "/usr/local"
    installed = _norm(found["versions"])
    expected = _pins(REQUIREMENTS)
    assert {k: installed.get(k) for k in expected} == expected
    assert not set(installed) - set(expected) - {"pip", "setuptools"}, "not the list's"
    assert plain.exit_code != 0 and "No module named 'smolagents'" in plain.stderr
    # the harness's folder holds exactly its own list
    assert _norm(json.loads(site.stdout)["versions"]) == _pins(HARNESS_REQUIREMENTS)
    # /opt/dataspace shows what the official image has there, and the manifest
    assert sorted(listing.stdout.split()) == [
        "TOOLS.md",
        "capabilities.json",
        "python-packages.txt",
        "runtime-manifest.json",
        "system-packages.txt",
    ]
    assert result.end_state == "submitted", result.error
    assert prediction.splitlines() == ["city,population", "Lyon,522000", "Graz,291000"]
    assert child == "1", "a code action's child process imported smolagents"
    assert SECRET not in (tmp_path / "events.jsonl").read_text()
