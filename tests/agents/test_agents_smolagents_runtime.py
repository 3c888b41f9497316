"""smolagents from the runtime image's own Python environment, not the controller's.

The runtime image installs ``images/runtime-requirements.txt`` (``--no-deps``, then ``pip
check``). This test builds the same environment from the same list into a venv (cached
by the list's hash under the system temp folder), binds it into a local sandbox and runs
the smolagents harness on that interpreter against the scripted server.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agents_helpers import CITIES, SECRET, model_for, workspace

from dataspace.agents import AgentContext, AgentLimits, EventLog, get_agent
from dataspace.release import TaskInput
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.sandbox, pytest.mark.llm, pytest.mark.integration, pytest.mark.slow]

REQUIREMENTS = Path(__file__).parents[2] / "images" / "runtime-requirements.txt"
INSIDE = "/opt/dataspace/runtime-env"
WRITE = (
    "Thought: write the answer\n<code>\nimport pandas as pd\n"
    "df = pd.read_csv('/workspace/cities.csv')\n"
    "df[df['population'] > 250000][['city', 'population']]"
    ".to_csv('/output/prediction.csv', index=False)\nfinal_answer('done')\n</code>"
)


@pytest.fixture(scope="module")
def runtime_env() -> Path:
    """A venv holding exactly the runtime image's Python packages."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    root = Path("/tmp") / f"dataspace-runtime-env-{digest}"
    venv = root / "venv"
    if not (root / "complete").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "--disable-pip-version-check", "-q"]
        res = subprocess.run(
            [*pip, "install", "--no-deps", "-r", str(REQUIREMENTS)], capture_output=True, text=True
        )
        if res.returncode != 0:
            pytest.skip(f"cannot install the runtime requirements here: {res.stderr[-500:]}")
        subprocess.run([*pip, "check"], check=True)
        (root / "complete").write_text(digest)
    return venv


def test_smolagents_runs_from_the_runtime_environment(local_backend, tmp_path, runtime_env):
    from dataspace.sandbox import Limits, SandboxSpec

    python = f"{INSIDE}/bin/python3"
    sb = local_backend.create(
        SandboxSpec(
            workspace=workspace(tmp_path, {"cities.csv": CITIES}),
            limits=Limits(wall_seconds=400, memory_bytes=2 * 1024**3),
            runtime_binds=((str(runtime_env), INSIDE),),
        )
    )
    events = EventLog(tmp_path / "events.jsonl")
    try:
        where = sb.exec(
            [python, "-c", "import smolagents; print(smolagents.__version__, smolagents.__file__)"]
        )
        with ScriptedServer({"task_1": [{"content": WRITE}]}) as srv:
            ctx = AgentContext(
                task=TaskInput(task_id="task_1", question="Which cities?"),
                sandbox=sb,
                limits=AgentLimits(wall_seconds=240),
                events=events,
                deadline=time.monotonic() + 240,
                settings={"model": model_for(srv), "python": python},
            )
            result = get_agent("smolagents").run(ctx)
        prediction = sb.read_file("/output/prediction.csv").decode()
    finally:
        events.close()
        sb.close()
    assert where.stdout.split() == [
        "1.26.0",
        f"{INSIDE}/lib/python3.11/site-packages/smolagents/__init__.py",
    ]
    assert result.end_state == "submitted", result.error
    assert prediction.splitlines() == ["city,population", "Lyon,522000", "Graz,291000"]
    assert SECRET not in (tmp_path / "events.jsonl").read_text()
