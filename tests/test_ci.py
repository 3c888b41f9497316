"""CI's command (``.ci/run``): the suite through ``scripts/dev.sh test``, slowest tests listed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ci_prints_the_20_slowest_tests_at_the_end() -> None:
    """Guards the suite's time budget being visible: ``--durations=20`` reaches pytest.
    ``-n 0`` (passed on to pytest, after dev.sh's own ``-n``) runs the one test without
    starting worker processes, each of which would collect the whole suite first."""
    out = subprocess.run(
        ["bash", ".ci/run", "-n", "0", "tests/test_ci.py::test_a_quick_target"],
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


def test_a_fresh_machines_first_set_up_goes_on_past_the_debian_root(tmp_path) -> None:
    """Guards the first set-up on a new machine: the Debian root is made before the
    workbench exists, and the step must end well (under ``set -e``) and let the set-up go
    on, instead of stopping it without a word. ``ensure_debian_root`` runs as dev.sh
    defines it, with a stand-in ``debootstrap`` and ``id`` (root) on PATH and an empty
    runtime root."""
    functions = _dev_functions(
        "debian_root_packages", "write_workbench_manifest", "ensure_debian_root"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "debootstrap").write_text('#!/bin/sh\nmkdir -p "$4/var/cache/apt/archives"\n')
    (bin_dir / "id").write_text("#!/bin/sh\necho 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    runtime = tmp_path / "runtime"
    out = subprocess.run(
        [
            "bash",
            "-c",
            "set -euo pipefail\n" + functions + "\nensure_debian_root\necho went on",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "DATASPACE_RUNTIME_ROOT": str(runtime),
        },
    )
    assert out.returncode == 0 and out.stdout.strip() == "went on", out.stdout + out.stderr
    assert (runtime / "root" / ".stamp").is_file()
    assert not (runtime / "python").exists()  # no workbench yet: no manifest was written


def _dev_functions(*names: str) -> str:
    """Functions of ``scripts/dev.sh``, as it defines them."""
    script = (ROOT / "scripts" / "dev.sh").read_text()
    out = []
    for name in names:
        start = script.index(f"\n{name}() {{")
        out.append(script[start : script.index("\n}\n", start) + 3])
    return "".join(out)


@pytest.mark.parametrize("uv", ["installs", "cannot-be-installed"])
def test_the_venv_is_installed_with_uv_or_else_with_pip(tmp_path, uv) -> None:
    """``ensure_venv`` installs the pins with uv; where uv itself cannot be installed it
    says so and installs the same pins with pip, and the set-up goes on. A stand-in
    ``.venv/bin/python`` records what it is asked to do."""
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "constraints.txt").write_text((ROOT / "constraints.txt").read_text())
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fail = 'case "$*" in *" -c constraints.txt uv") exit 1;; esac\n'
    (venv_bin / "python").write_text(
        '#!/bin/sh\necho "$*" >> "$(dirname "$0")/../../calls"\n'
        + (fail if uv == "cannot-be-installed" else "")
    )
    (venv_bin / "python").chmod(0o755)
    out = subprocess.run(
        [
            "bash",
            "-c",
            "set -euo pipefail\n"
            + _dev_functions("pip_quietly", "python_bin", "ensure_venv")
            + "\nensure_venv\necho went on",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0 and out.stdout.strip() == "went on", out.stdout + out.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[0] == "-m pip install -q --disable-pip-version-check -c constraints.txt uv"
    if uv == "installs":
        assert calls[1:] == [
            "-m uv pip install -q --python .venv/bin/python --compile-bytecode"
            " -c constraints.txt -e .[dev]"
        ]
        assert "warning" not in out.stderr
    else:
        assert calls[1:] == [
            "-m pip install -q --disable-pip-version-check -c constraints.txt -e .[dev]"
        ]
        assert "warning: installing with uv failed (above); installing with pip" in out.stderr
    assert (tmp_path / ".venv" / ".dataspace-stamp").is_file()
    # the pin uv is installed at is in the constraints
    assert "uv==" in (ROOT / "constraints.txt").read_text()


@pytest.mark.skipif(
    not Path("/usr/bin/python3.11").is_file(),
    reason="no Debian python3.11 at /usr/bin (the set-up installs it as root)",
)
def test_the_venv_is_made_from_debians_python_before_one_on_the_path(tmp_path) -> None:
    """``python_bin`` chooses Debian's /usr/bin/python3.11 (built with profile-guided and
    link-time optimization) over a Python 3.11 earlier on the PATH, and falls back to the
    PATH's when Debian's is not 3.11."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.11").write_text("#!/bin/sh\nexit 0\n")  # says it is 3.11
    (bin_dir / "python3.11").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    functions = _dev_functions("python_bin")

    def chosen(script: str) -> str:
        out = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{functions}\n{script}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            env=env,
        )
        return out.stdout.strip()

    assert chosen("python_bin") == "/usr/bin/python3.11"
    # the same function with Debian's path standing for a Python that is not 3.11
    assert chosen(functions.replace("/usr/bin/python3.11", "/bin/false") + "\npython_bin") == (
        str(bin_dir / "python3.11")
    )


@pytest.mark.parametrize(("cores", "workers"), [(1, 4), (2, 4), (3, 5), (4, 6), (16, 6)])
def test_the_suite_runs_two_workers_more_than_cores_from_4_to_6(cores, workers) -> None:
    """The worker count ``dev.sh test`` computes, as it computes it, for a given ``nproc``."""
    script = (ROOT / "scripts" / "dev.sh").read_text()
    line = next(ln.strip() for ln in script.splitlines() if ln.strip().startswith("workers="))
    out = subprocess.run(
        ["bash", "-c", f'nproc() {{ echo {cores}; }}\n{line}\necho "$workers"'],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert out.stdout.strip() == str(workers)


def _pytest(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_test_files_run_longest_first_by_their_recorded_seconds() -> None:
    """Guards the suite's order: the files of a run are taken longest first by
    ``tests/durations.json`` (given shortest first here), each file's tests in their order."""
    recorded = json.loads((ROOT / "tests" / "durations.json").read_text())
    present = {f: s for f, s in recorded.items() if (ROOT / f).is_file()}
    assert len(present) >= 0.9 * len(recorded)  # the record names the suite's files
    del present["tests/test_ci.py"]
    short = min(present, key=present.__getitem__)
    long = max(present, key=present.__getitem__)
    out = _pytest("--collect-only", "-q", short, long, "tests/test_ci.py")
    assert out.returncode == 0, out.stdout + out.stderr
    ids = [ln for ln in out.stdout.splitlines() if "::" in ln]
    files = list(dict.fromkeys(i.split("::")[0] for i in ids))
    expected = sorted([short, long, "tests/test_ci.py"], key=lambda f: -recorded[f])
    assert files == expected, files
    mine = [i.split("::", 1)[1] for i in ids if i.startswith("tests/test_ci.py::")]
    assert mine[-1] == "test_a_quick_target"  # the last in this file stays last


def test_a_durations_record_that_is_not_json_is_one_line_naming_it_and_the_fix(tmp_path) -> None:
    """Guards the order's input: a spoiled ``tests/durations.json`` stops the run with its
    name and how to write it again, instead of the files running in another order."""
    import shutil

    copy = tmp_path / "repo"
    (copy / "tests").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "conftest.py", copy / "tests" / "conftest.py")
    (copy / "tests" / "durations.json").write_text('{"tests/test_x.py": 1.0,')
    (copy / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    out = _pytest("tests/test_x.py", cwd=copy)
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage error
    assert "tests/durations.json: not JSON" in out.stderr, out.stderr
    assert "./scripts/dev.sh test --record-durations" in out.stderr, out.stderr


def test_record_durations_writes_each_files_seconds_from_every_worker(tmp_path) -> None:
    """``--record-durations PATH`` (what ``./scripts/dev.sh test --record-durations``
    writes to ``tests/durations.json``) counts every test of every file, in a run in
    worker processes too."""
    path = tmp_path / "durations.json"
    out = _pytest(
        "-n", "2", "--dist", "loadfile", "--record-durations", str(path),
        "tests/test_ci.py::test_a_quick_target", "tests/test_error_tree.py",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(path.read_text())
    assert set(data) == {"tests/test_ci.py", "tests/test_error_tree.py"}, data
    assert all(isinstance(s, float) and s >= 0 for s in data.values()), data


def test_a_quick_target() -> None:
    """The one test the CI check above runs (so it never runs the whole suite)."""
    assert subprocess.run(["true"], check=False).returncode == 0


pytestmark = pytest.mark.timeout(300)
