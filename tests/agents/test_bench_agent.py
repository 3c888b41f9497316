"""``scripts/bench_agent.py`` at a tiny size: it prints every figure and leaves nothing behind.

The script runs the DataSpace agent for real (local sandboxes, scripted model servers on
loopback) and makes a workspace and a trace folder per attempt; a run at the higher levels
makes thousands. This checks the figures are printed and that the script's temporary
folder is gone when it ends, never how fast it was.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(300), pytest.mark.sandbox, pytest.mark.llm]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_agent.py"


def test_a_tiny_run_prints_its_figures_and_removes_every_workspace_and_trace(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["TMPDIR"] = str(tmp)
    tiny = ["--turns", "2", "--repeat", "1", "--levels", "1,2", "--latency", "0.01"]
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *tiny],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "bash true + observation" in out and "controller CPU/turn" in out
    assert "sustained (mean turn within 1.5x of N=1):" in out  # its count depends on load
    # what is left is the local backend's own state folder, kept across runs by design
    left = sorted(p.name for p in tmp.iterdir())
    assert left == [f"dataspace-sandbox-{os.geteuid()}"], left
