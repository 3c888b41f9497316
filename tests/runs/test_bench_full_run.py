"""``scripts/bench_full_run.py`` at a tiny size: its figures agree with each other.

The script runs ``dataspace run`` for real (local Ray, local sandboxes, scripted backbones
on loopback); this checks what it reports is consistent, never how fast it was: every
planned attempt ran once, the ideal is the one of the drawn latencies, no more attempts
ran at once than the concurrency, so the makespan cannot beat the ideal.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench_full_run.py"


def test_tiny_full_run_reports_consistent_figures(tmp_path):
    out = tmp_path / "figures.json"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--tasks",
            "5",
            "--backbones",
            "2",
            "--concurrency",
            "3",
            "--json",
            str(out),
            "--keep",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=850,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (f,) = json.loads(out.read_text())
    # every planned attempt ran, once, and ended as scripted (the scored ones correct)
    assert f["attempts"] == f["expected_attempts"] == f["unique_attempts"] == 10
    assert f["statuses"] == {"submitted": 10} and f["infra_retries"] == 0
    assert f["scored"] == 2 * 1 and f["passed"] == f["scored"]  # task_1 of 5 is scored
    # the ideal is the drawn latencies' at this concurrency
    lat = f["latencies"]
    assert len(lat) == 10 and math.isclose(f["scripted_total"], sum(lat))
    assert math.isclose(f["ideal"], max(sum(lat) / 3, max(lat)))
    assert f["ideal"] <= f["simulated"] + 1e-9
    assert math.isclose(f["ratio"], f["makespan"] / f["ideal"])
    # never more than the concurrency at once, each attempt at least its model time
    assert 1 <= f["max_overlap"] <= 3
    assert f["makespan"] >= f["ideal"] and f["command_wall"] >= f["makespan"]
    # the CPU the run used cannot exceed every CPU for its whole time
    assert 0 < f["cpu_bound"] <= f["command_wall"] + 0.1
    assert f["overhead_median"] >= 0 and f["http_overhead_mean"] >= 0
    assert f["controller_cpu_per_attempt"] > 0 and f["rss_driver"] > 0
    assert f["peak_workers"] >= 1 and f["rss_workers"] > 0
    assert "attempts 10 of 10 (10 distinct)" in proc.stdout
    assert f"ratio {f['ratio']:.3f}" in proc.stdout
