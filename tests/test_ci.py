"""CI's command (``.ci/run``): the suite through ``scripts/dev.sh test``, slowest tests listed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ci_prints_the_20_slowest_tests_at_the_end() -> None:
    """Guards the suite's time budget being visible: ``--durations=20`` reaches pytest."""
    out = subprocess.run(
        ["bash", ".ci/run", "tests/test_ci.py::test_a_quick_target"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    tail = out.stdout[out.stdout.index("slowest 20 durations") :]
    assert "1 passed" in tail  # the list comes before pytest's last line


def test_the_set_up_leaves_every_project_module_compiled() -> None:
    """After the set-up, no process compiles a project module again: every module of the
    four packages has its bytecode beside it, as new as its source (an editable install is
    never compiled, and CI's environment writes no bytecode as it imports)."""
    check = (
        "import importlib.util, pathlib, sys\n"
        "stale = []\n"
        "for pkg in ('dataspace', 'builder', 'evaluator', 'ray_jobs'):\n"
        "    for src in pathlib.Path(pkg).rglob('*.py'):\n"
        "        pyc = pathlib.Path(importlib.util.cache_from_source(str(src)))\n"
        "        if not pyc.is_file() or pyc.stat().st_mtime < src.stat().st_mtime:\n"
        "            stale.append(str(src))\n"
        "print(len(stale), stale[:5])\n"
        "sys.exit(1 if stale else 0)\n"
    )
    out = subprocess.run(
        ["bash", "scripts/dev.sh", "shell", ".venv/bin/python", "-c", check],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_quick_target() -> None:
    """The one test the CI check above runs (so it never runs the whole suite)."""
    assert subprocess.run(["true"], check=False).returncode == 0


pytestmark = pytest.mark.timeout(300)
