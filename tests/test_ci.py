"""CI's command (``.ci/run``): the suite through ``scripts/dev.sh test``, slowest tests listed."""

from __future__ import annotations

import subprocess
import sys
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


def test_files_with_the_longest_time_budget_are_collected_first() -> None:
    """Guards the suite's wall time: xdist hands out whole files in the collection's order
    (``--no-loadscope-reorder``), so the long run-through files (a ``timeout`` mark above
    the configured one) must come before the quick ones, not after."""
    out = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"),
            *("tests/test_ci.py", "tests/runs/test_plan.py"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    files = [line.split("::")[0] for line in out.stdout.splitlines() if "::" in line]
    assert files[0] == "tests/runs/test_plan.py" and files[-1] == "tests/test_ci.py", files
    assert "--no-loadscope-reorder" in (ROOT / "scripts" / "dev.sh").read_text()


def test_a_quick_target() -> None:
    """The one test the CI check above runs (so it never runs the whole suite)."""
    assert subprocess.run(["true"], check=False).returncode == 0


pytestmark = pytest.mark.timeout(300)
