"""Trace pages written as attempts finish, and what the report then writes, on the real CLI.

Guards: a trace page depended on the whole results table (a token count shown as
``1,234`` or ``1234`` by the dtype of its column across every attempt), so pages could only
be written by the report at the end. Now ``dataspace run`` writes each attempt's page when
it finishes, byte-identical to the one the report writes; the report keeps those and
writes again only pages that are missing or stale (an older format, a rescored verdict).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import (
    KEY_ENV,
    SECRET,
    as_terminal_foreground,
    cli_env,
    dataspace,
    model_agent,
    short_ray_dir,
    write_spec,
)
from test_report_mid_run import HELD, SOLVE, _wait_for

from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _pages(root: Path) -> dict[str, bytes]:
    base = root / "report" / "traces"
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*.html"))}


def _traces_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("traces:"))


def test_pages_at_finish_resume_rescore_and_older_pages(tmp_path, ray_dir):
    release = write_tiny_release(tmp_path / "release", tasks=3)
    store = tmp_path / "store"
    run_dir = store / "runs" / "r1"
    page = run_dir / "report" / "traces" / "r1" / "react"
    scripts = {"*": [], "task_1": SOLVE, "task_2": SOLVE, "task_3": HELD}
    with ScriptedServer(scripts) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, store, [model_agent(srv.url)])
        env = cli_env(ray_dir, **{KEY_ENV: SECRET})
        proc = subprocess.Popen(
            [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=as_terminal_foreground,
        )
        try:
            # the finished attempts' pages appear while the run is still going
            _wait_for(
                "the pages of the finished attempts",
                lambda: (page / "task_1-1.html").exists() and (page / "task_2-1.html").exists(),
                proc,
            )
            _wait_for("the held attempt", lambda: srv.served("task_3", 0) >= 1, proc)
            early = _pages(run_dir)
            assert sorted(early) == ["r1/react/task_1-1.html", "r1/react/task_2-1.html"]
            proc.send_signal(signal.SIGINT)  # stop the run; a rerun resumes it
            out, _ = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
            srv.open_gate("hold")
        assert "interrupted" in out, out
        # resume: only task_3 runs; its page is written when it finishes
        resumed = dataspace("run", str(spec), env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    pages = _pages(run_dir)
    assert sorted(pages) == [f"r1/react/task_{k}-1.html" for k in (1, 2, 3)]
    assert {k: pages[k] for k in early} == early  # kept as written at finish

    # a page written at finish is byte-identical to the one a report writes
    other = tmp_path / "elsewhere"
    rep = dataspace("report", str(run_dir), "--out", str(other), "--traces", "all", env=cli_env())
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert _pages(other) == pages
    rep = dataspace("report", str(run_dir), env=cli_env())
    assert _traces_line(rep.stdout) == "traces:   0 pages written, 3 kept"

    # a page of an older version (no content key) is written again, the same as now
    old = page / "task_2-1.html"
    first, _, rest = old.read_bytes().partition(b"\n")
    old.write_bytes(first + b"\n" + rest.partition(b"\n")[2])
    rep = dataspace("report", str(run_dir), env=cli_env())
    assert _traces_line(rep.stdout) == "traces:   1 pages written, 2 kept"
    assert _pages(run_dir) == pages

    # rescore after a repaired gold: the rescored version's pages show the new verdict
    assert b"incorrect" in pages["r1/react/task_1-1.html"]
    (release / "output" / "task_1" / "gold.csv").write_text("city,population\nLyon,522000\n")
    res = dataspace("rescore", str(run_dir), env=cli_env())
    assert res.returncode == 0, res.stdout + res.stderr
    assert "react task_1 attempt 1:" in res.stdout and "-> correct" in res.stdout
    rescored = run_dir / "rescore-1"
    rep = dataspace("report", str(rescored), env=cli_env())
    assert rep.returncode == 0, rep.stdout + rep.stderr
    new = _pages(rescored)
    assert sorted(new) == sorted(pages)
    assert new["r1/react/task_1-1.html"] != pages["r1/react/task_1-1.html"]
    assert b'<span class="badge ok">correct</span>' in new["r1/react/task_1-1.html"]
    # reported into the run's own folder, only the page whose verdict changed is rewritten
    rep = dataspace("report", str(rescored), "--out", str(run_dir), env=cli_env())
    assert _traces_line(rep.stdout) == "traces:   1 pages written, 2 kept"
    assert _pages(run_dir)["r1/react/task_1-1.html"] == new["r1/react/task_1-1.html"]
