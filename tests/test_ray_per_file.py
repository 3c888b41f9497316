"""A test file that leaves Ray connected fails at its end, and Ray is disconnected there.

A worker's later files would otherwise find that connection: their model limiters become
actors of an instance they never asked for, whose driver has lived for the whole session.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

FAKE_RAY = """
import sys, types

state = {"connected": False, "shutdowns": 0}


def _shutdown():
    state["connected"] = False
    state["shutdowns"] += 1


sys.modules["ray"] = types.SimpleNamespace(
    is_initialized=lambda: state["connected"], shutdown=_shutdown, state=state
)
"""


def test_a_file_that_leaves_ray_connected_fails_and_the_next_file_finds_it_disconnected(
    tmp_path: Path,
) -> None:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "fake_ray.py").write_text(FAKE_RAY)
    (tmp_path / "test_a_leaves.py").write_text(
        "import fake_ray\n\n\ndef test_connects():\n    fake_ray.state['connected'] = True\n"
    )
    (tmp_path / "test_b_closes.py").write_text(
        "import fake_ray\n\n\n"
        "def test_finds_it_disconnected():\n"
        "    assert not fake_ray.state['connected'] and fake_ray.state['shutdowns'] == 1\n"
        "    fake_ray.state['connected'] = True\n"
        "    fake_ray.state['connected'] = False  # what it connected, it disconnects\n"
    )
    args = ["-p", "no:cacheprovider", "-p", "no:xdist", "-q", str(tmp_path)]
    p = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "2 passed, 1 error" in out, out
    assert "ERROR at teardown of test_connects" in out, out
    assert "test_a_leaves.py left Ray connected: use the ray_local fixture" in out, out
