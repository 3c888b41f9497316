"""smolagents from the runtime's own Python environment, not the controller's.

The runtime image installs ``images/runtime-requirements.txt`` into its Python
(``--no-deps``, then ``pip check``); ``scripts/dev.sh`` builds the local sandbox's workbench
Python (shown inside the sandbox at ``/usr/local``) from the same list. This test checks
that the workbench was built from the list as it is now, that ``python3`` inside the sandbox
imports smolagents from there, and runs the smolagents harness on it against the scripted
server.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from agents_helpers import CITIES, SECRET, model_for, workspace

from dataspace.agents import AgentContext, AgentLimits, EventLog, get_agent
from dataspace.release import TaskInput
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration]

REQUIREMENTS = Path(__file__).parents[2] / "images" / "runtime-requirements.txt"
WRITE = (
    "Thought: write the answer\n<code>\nimport pandas as pd\n"
    "df = pd.read_csv('/workspace/cities.csv')\n"
    "df[df['population'] > 250000][['city', 'population']]"
    ".to_csv('/output/prediction.csv', index=False)\nfinal_answer('done')\n</code>"
)
PROBE = (
    "import json, importlib.metadata as m, smolagents, openai, sys; "
    "print(json.dumps({'prefix': sys.prefix, 'file': smolagents.__file__, "
    "'versions': {d.metadata['Name'].lower().replace('_', '-'): d.version "
    "for d in m.distributions()}}))"
)


def _pins() -> dict[str, str]:
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            pins[name.lower().replace("_", "-").replace(".", "-")] = version
    return pins


def test_smolagents_runs_from_the_runtime_environment(local_backend, tmp_path):
    from dataspace.sandbox import Limits, SandboxSpec

    sb = local_backend.create(
        SandboxSpec(
            workspace=workspace(tmp_path, {"cities.csv": CITIES}),
            limits=Limits(wall_seconds=400, memory_bytes=2 * 1024**3),
        )
    )
    events = EventLog(tmp_path / "events.jsonl")
    try:
        probe = sb.exec(["python3", "-c", PROBE])
        assert probe.exit_code == 0, probe.stderr
        with ScriptedServer({"task_1": [{"content": WRITE}]}) as srv:
            ctx = AgentContext(
                task=TaskInput(task_id="task_1", question="Which cities?"),
                sandbox=sb,
                limits=AgentLimits(wall_seconds=240),
                events=events,
                deadline=time.monotonic() + 240,
                settings={"model": model_for(srv)},
            )
            result = get_agent("smolagents").run(ctx)
        prediction = sb.read_file("/output/prediction.csv").decode()
    finally:
        events.close()
        sb.close()
    found = json.loads(probe.stdout)
    # the sandbox's Python is the runtime's, holding exactly the list's pins
    assert found["file"].startswith("/usr/local/lib/python3.11/site-packages/smolagents/")
    installed = {k.replace(".", "-"): v for k, v in found["versions"].items()}
    missing = {k: v for k, v in _pins().items() if installed.get(k) != v}
    assert not missing, f"the workbench Python is not built from the list: {missing}"
    assert installed["smolagents"] == "1.26.0"
    assert result.end_state == "submitted", result.error
    assert prediction.splitlines() == ["city,population", "Lyon,522000", "Graz,291000"]
    assert SECRET not in (tmp_path / "events.jsonl").read_text()
