"""The local backend under an unprivileged controller: user namespaces and rlimits.

The controller runs as uid 65534 with the system's Python (the project's virtual
environment may live where that user cannot read), so this needs root to start it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataspace.sandbox import _procfs

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path("/usr/bin/python3")
NOBODY = 65534

CONTROLLER = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from dataspace.sandbox import Limits, SandboxSpec, get_backend

backend = get_backend("local", state_dir=sys.argv[2])
sandbox = backend.create(SandboxSpec(workspace=sys.argv[3], limits=Limits(wall_seconds=60)))
info = sandbox.info()
report = {
    "enforcement": info["enforcement"],
    "user_namespace": info["user_namespace"],
    "pid_namespace": info["pid_namespace"],
    "state_dir": info["state_dir"],
    "ids": sandbox.exec("id -u; id -g").stdout.split(),
    "caps": sandbox.exec("grep -E '^CapEff' /proc/self/status").stdout.split()[1],
    "workspace": sandbox.exec("cat /workspace/data.csv").stdout,
    "listing": sandbox.exec("ls /workspace /workspace/docs").stdout,
    "hidden": info["workspace_host_path_hidden"],
    "workspace_write": sandbox.exec("touch /workspace/new").exit_code,
    "timeout": sandbox.exec("sleep 30 & sleep 31", timeout=0.5).status,
    "network": sandbox.exec(
        ["python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', {sys.argv[4]}))"]
    ).exit_code,
}
sandbox.write_file("a/b.txt", b"written")
report["edit"] = sandbox.exec("cat a/b.txt && echo more >> a/b.txt").exit_code
report["read"] = sandbox.read_file("a/b.txt").decode()
try:
    sandbox.read_file("/etc/passwd")
except PermissionError:
    report["escape"] = "refused"
from dataspace.sandbox.local import _procs
report["members"] = [[p, t] for p, t, _ in _procs.namespace_members(info["pid_namespace"])]
sandbox.close()
print(json.dumps(report))
"""


def _world_readable(path: Path) -> bool:
    return all(p.stat().st_mode & stat.S_IXOTH for p in [path, *path.parents] if p != Path("/"))


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder uid 65534 can reach (pytest's own temp folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="dataspace-userns-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_an_unprivileged_controller_gets_the_same_isolation(shared_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("starting a controller as uid 65534 needs root")
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"{SYSTEM_PYTHON} is missing")
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2] >= (3, 11))"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    if version != "True":
        pytest.skip(f"{SYSTEM_PYTHON} is older than Python 3.11")
    if not _world_readable(REPO / "dataspace" / "sandbox"):
        pytest.skip(f"{REPO} is not readable by uid {NOBODY}")
    for name in ("max_user_namespaces",):
        if Path(f"/proc/sys/user/{name}").read_text().strip() == "0":
            pytest.skip("user namespaces are disabled on this host")
    workspace = shared_dir / "workspace"
    workspace.mkdir(mode=0o755)
    (workspace / "data.csv").write_text("a\n1\n")
    (workspace / "docs").mkdir(mode=0o755)
    (workspace / "docs" / "notes.md").write_text("# notes\n")
    state = shared_dir / "state"
    state.mkdir()
    os.chown(state, NOBODY, NOBODY)
    with socket.create_server(("127.0.0.1", 0)) as server:
        result = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             str(SYSTEM_PYTHON), "-I", "-c", CONTROLLER, str(REPO), str(state), str(workspace),
             str(server.getsockname()[1])],
            capture_output=True, text=True, timeout=120, cwd="/", env={"PATH": "/usr/bin:/bin"},
            check=False,
        )  # fmt: skip
    if "unprivileged user namespaces" in result.stderr:
        pytest.skip(f"this host refuses unprivileged user namespaces: {result.stderr[-300:]}")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["enforcement"] == "rlimit"
    assert report["user_namespace"] is True
    assert report["ids"] == [str(NOBODY), str(NOBODY)]
    assert int(report["caps"], 16) == 0
    assert report["workspace"] == "a\n1\n"
    assert report["listing"] == "/workspace:\ndata.csv\ndocs\n\n/workspace/docs:\nnotes.md\n"
    assert report["hidden"] is True
    assert report["workspace_write"] != 0
    assert report["timeout"] == "timeout"
    assert report["network"] != 0
    assert report["edit"] == 0
    assert report["read"] == "writtenmore\n"
    assert report["escape"] == "refused"
    assert not Path(report["state_dir"]).exists()
    # Nothing the sandbox ran is left running. By identity (pid and start time), not by the
    # namespace inode, which the next namespace created (a concurrent test's) may reuse.
    assert report["members"]
    running = [p for p, t in report["members"] if _procfs.alive(p, t) and _procfs.running(p)]
    assert running == [], [Path(f"/proc/{pid}/stat").read_text()[:200] for pid in running]
