"""CI's command (``.ci/run``): the suite through ``scripts/dev.sh test``, slowest tests listed."""

from __future__ import annotations

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


def test_a_quick_target() -> None:
    """The one test the CI check above runs (so it never runs the whole suite)."""
    assert subprocess.run(["true"], check=False).returncode == 0


pytestmark = pytest.mark.timeout(300)
