"""Preflight checks the local workbench: its manifest, its tools, and the recorded runtime.

Each test works on its own copy of the installed workbench's root (the manifest and the
files it hashes; the Python and harness folders linked), given to the local backend as
``sandbox.options.runtime_root``, so a broken or changed workbench is made without touching
the machine's.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import cli_env, dataspace, write_spec

from dataspace.testing.releases import write_tiny_release

INSTALLED = Path("/opt/dataspace")

pytestmark = pytest.mark.skipif(
    not (INSTALLED / "runtime-manifest.json").is_file(),
    reason=f"no Data Workbench Runtime installed at {INSTALLED} (scripts/dev.sh installs it)",
)


@pytest.fixture
def workbench(tmp_path):
    """A copy of the installed workbench root; returns (root, manifest path)."""
    root = tmp_path / "workbench"
    root.mkdir()
    for name in ("runtime-manifest.json", "TOOLS.md", "capabilities.json"):
        shutil.copyfile(INSTALLED / name, root / name)
    os.symlink(os.path.realpath(INSTALLED / "python"), root / "python")
    if (INSTALLED / "root").exists():  # the sandboxes' Debian 12 root
        os.symlink(os.path.realpath(INSTALLED / "root"), root / "root")
    if (INSTALLED / "harnesses").exists():
        os.symlink(os.path.realpath(INSTALLED / "harnesses"), root / "harnesses")
    return root, root / "runtime-manifest.json"


def _edit(path: Path, change) -> None:
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def _spec(tmp_path, root, release):
    return write_spec(
        tmp_path / "spec.yaml",
        release,
        tmp_path / "store",
        [{"name": "gold", "harness": "gold"}],
        sandbox={
            "backend": "local",
            "cpus": 1,
            "memory": "1GiB",
            "options": {"runtime_root": str(root)},
        },
    )


def test_doctor_reports_the_workbench_and_its_tools():
    """Guards ``dataspace doctor``: the machine's workbench, its version and its tools."""
    done = dataspace("doctor", env=cli_env())
    line = next(ln for ln in done.stdout.splitlines() if "sandbox.workbench" in ln)
    assert line.startswith("ok   sandbox.workbench: Data Workbench Runtime 1.0 at /opt/dataspace")
    for tool in ("pdftotext", "ffprobe", "tesseract", "rg", "jq", "sqlite3", "chi_sim"):
        assert tool in line
    assert done.returncode == (2 if "FAIL" in done.stdout else 0), done.stdout + done.stderr


def test_an_incomplete_workbench_fails_preflight_before_anything_is_recorded(tmp_path, workbench):
    """Guards the manifest check: a missing tool or hash is one line, exit 2, nothing run."""
    root, manifest = workbench
    release = write_tiny_release(tmp_path / "rel", tasks=1)
    spec = _spec(tmp_path, root, release)
    env = cli_env()

    def no_chinese(m):
        m["system_packages"]["tesseract-ocr-chi-sim"] = "missing"

    _edit(manifest, no_chinese)
    doc = dataspace("doctor", str(spec), "--no-model-calls", env=env)
    assert doc.returncode == 2, doc.stdout + doc.stderr
    fail = [ln for ln in doc.stdout.splitlines() if ln.startswith("FAIL")]
    assert fail == [
        "FAIL sandbox.workbench: workbench tools missing: tesseract language chi_sim "
        "(tesseract-ocr-chi-sim); reinstall the workbench: scripts/dev.sh shell true (as root)"
    ]
    run = dataspace("run", str(spec), env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "sandbox.workbench: workbench tools missing: tesseract language chi_sim" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "store" / "runs" / "r1" / "spec.json").exists()

    _edit(manifest, lambda m: m.pop("python_packages_sha256"))
    doc = dataspace("doctor", str(spec), "--no-model-calls", env=env)
    assert doc.returncode == 2
    assert f"FAIL sandbox.workbench: workbench manifest {manifest} is incomplete (no " in doc.stdout


def test_a_resumed_run_refuses_another_workbench_naming_the_sandbox(tmp_path, workbench):
    """Guards the recorded runtime: a reinstalled workbench is named as such, with the fix.

    The run's only task is unscored, so the oracle's attempt is skipped and the run is
    recorded without starting Ray.
    """
    root, manifest = workbench
    release = write_tiny_release(tmp_path / "rel", tasks=1)
    (release / "output" / "task_1" / "gold.csv").unlink()
    (release / "evaluation" / "configs" / "task_1.json").unlink()
    spec = _spec(tmp_path, root, release)
    env = cli_env()
    first = dataspace("run", str(spec), env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (tmp_path / "store" / "runs" / "r1" / "spec.json").exists()
    same = dataspace("doctor", str(spec), "--no-model-calls", env=env)
    assert "ok   sandbox.runtime: the runtime run r1 recorded" in same.stdout

    def reinstalled(m):
        m["python"] = "3.11.9"
        m["python_packages_sha256"] = "0" * 64

    _edit(manifest, reinstalled)
    expected = (
        f"sandbox: the workbench at {root} is not the one run 'r1' was made with (changed: "
        "runtime.python, runtime.python_packages_sha256); reinstall the workbench it "
        "recorded, or give the run a new run_id"
    )
    again = dataspace("run", str(spec), env=env)
    assert again.returncode == 2, again.stdout + again.stderr
    assert again.stderr.strip() == f"error: {expected}"
    doc = dataspace("doctor", str(spec), "--no-model-calls", env=env)
    assert doc.returncode == 2
    assert f"FAIL sandbox.runtime: {expected}" in doc.stdout.splitlines()
