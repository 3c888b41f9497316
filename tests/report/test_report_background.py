"""Figures drawn in a forked process: the same results as drawn here, failures surface."""

from __future__ import annotations

import os

import pytest

from dataspace.report.background import Background


def test_jobs_run_in_another_process_and_return_their_results():
    """Guards the forked worker: results come back by name, computed elsewhere."""
    here = os.getpid()
    got = Background({"pid": os.getpid, "text": lambda: "<svg/>" * 3}).results()
    assert got["text"] == "<svg/><svg/><svg/>"
    assert got["pid"] != here


def test_a_job_that_fails_in_the_worker_is_run_here_and_raises():
    """Guards the fallback: a failing job is never silently dropped."""

    def boom() -> str:
        raise ValueError("no figure")

    with pytest.raises(ValueError, match="no figure"):
        Background({"ok": lambda: 1, "bad": boom}).results()


def test_no_jobs_means_no_worker():
    """Guards the empty case: nothing to draw starts no process."""
    assert Background({}).results() == {}


_DRAW_EVERY_FIGURE = r"""
import json, sys
from dataspace.report import build, build_report, plots
from dataspace.store import open_store
from dataspace.testing.synthetic import default_agents, write_synthetic_run

root = sys.argv[1]
store = open_store(root)
write_synthetic_run(store, "r", agents=default_agents(3), tasks=6, attempts=2, seed=3)
plots.import_drawing()
before = {m for m in sys.modules if m.split(".")[0] == "matplotlib"}
build.BACKGROUND_FIGURES = ()  # every figure drawn here, where its imports can be seen
out = build_report([f"{root}/runs/r"], out=f"{root}/report", traces="none")
new = sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib" and m not in before)
print(json.dumps({"figures": sorted(out.figures), "new": new}))
"""


def test_the_forked_child_inherits_every_module_the_figures_need(tmp_path):
    """Guards ``plots.import_drawing``: after it, drawing every figure of a report imports
    no further matplotlib module, so the child that draws the heaviest figures imports
    nothing again (a module missing from the list would be imported twice per report)."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _DRAW_EVERY_FIGURE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["figures"] == ["accuracy", "gaps", "pareto", "passk", "spread"]
    assert got["new"] == [], f"add these to plots.import_drawing: {got['new']}"
