"""The local sandbox against a hostile command: no channel between attempts, no nested
namespaces, no host path, bounded collect, nothing running at collect, honest statuses.

Every test starts real sandboxes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataspace.sandbox import Limits, SandboxSpec, _procfs
from dataspace.sandbox.local import LocalBackend, LocalSandbox, _cgroup, _seccomp

pytestmark = pytest.mark.sandbox

# add_key / keyctl through ctypes: no keyutils needed inside.
KEYRING = textwrap.dedent("""
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    ADD_KEY, KEYCTL = {add_key}, {keyctl}
    KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING, KEYCTL_SEARCH = -4, -3, 10
    if sys.argv[1] == "add":
        for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING):
            r = libc.syscall(ADD_KEY, b"user", b"ds-probe", b"secret-9c1e", 11, ring)
            print("add", r, ctypes.get_errno())
    else:
        for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING):
            r = libc.syscall(KEYCTL, KEYCTL_SEARCH, ring, b"user", b"ds-probe", 0)
            print("search", r, ctypes.get_errno())
""").format(
    add_key=248 if os.uname().machine == "x86_64" else 217,
    keyctl=250 if os.uname().machine == "x86_64" else 219,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "release" / "input" / "task_7" / "context"
    folder.mkdir(parents=True)
    (folder / "data.csv").write_text("a\n1\n")
    return folder


@pytest.fixture
def make(local_backend: LocalBackend, workspace: Path) -> Iterator:
    created: list[LocalSandbox] = []

    def make_sandbox(**limits: float) -> LocalSandbox:
        sandbox = local_backend.create(SandboxSpec(workspace=workspace, limits=Limits(**limits)))
        created.append(sandbox)
        return sandbox

    yield make_sandbox
    for sandbox in created:
        sandbox.close()


def test_a_key_added_in_one_attempt_is_not_seen_by_the_next(make) -> None:
    first = make()
    added = first.exec(["python3", "-c", KEYRING, "add"])
    assert added.exit_code == 0, added.stderr
    # Both keyring calls are refused outright (EPERM = 1), for the user and session rings.
    assert added.stdout.split("\n")[:2] == ["add -1 1", "add -1 1"]
    first.close()
    found = make().exec(["python3", "-c", KEYRING, "search"])
    assert found.exit_code == 0, found.stderr
    assert [line.split()[1] for line in found.stdout.splitlines()] == ["-1", "-1"]


def test_no_nested_user_namespace_and_no_mounts_inside(make) -> None:
    sandbox = make()
    nested = sandbox.exec("unshare -Ur id -u")
    assert nested.exit_code != 0
    assert "Operation not permitted" in nested.stderr
    assert sandbox.exec("unshare -m true").exit_code != 0
    assert sandbox.exec("unshare -n true").exit_code != 0
    status = sandbox.exec("grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status").stdout
    fields = dict(line.split(":\t") for line in status.splitlines())
    assert fields == {"NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0000000000000000"}
    # Threads and plain forks still work (clone without namespace flags, clone3 falls back).
    script = "import threading; t = threading.Thread(target=print, args=('ok',)); t.start()"
    assert make().exec(["python3", "-c", script]).stdout == "ok\n"


def _seccomp_mode(tid: int) -> str:
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    return next(line.split()[1] for line in status.splitlines() if line.startswith("Seccomp:"))


def test_the_filter_sits_on_the_spawner_thread_only(make) -> None:
    """Commands inherit the filter from the spawner threads; the others run without it."""
    assert make().exec("grep ^Seccomp: /proc/self/status").stdout == "Seccomp:\t2\n"
    # One set of such threads per process, however many backends (the runner makes one per
    # attempt).
    backends = [LocalBackend(sweep=False) for _ in range(3)]
    assert all(b.seccomp is not None for b in backends)
    spawners = [t for t in threading.enumerate() if t.name == "sandbox-seccomp-spawner"]
    assert len(spawners) == _seccomp.SPAWNER_THREADS
    for spawner in spawners:
        assert spawner.native_id is not None and _seccomp_mode(spawner.native_id) == "2"
    assert _seccomp_mode(threading.get_native_id()) == "0"


SPAWN_AFTER_FORK = textwrap.dedent("""
    import os, subprocess, sys
    from dataspace.sandbox.local import _procs, _seccomp
    spawner = _procs.Spawner(setup=_seccomp.Filter().install_on_thread)
    def mode():
        out = spawner.popen(["grep", "^Seccomp:", "/proc/self/status"], stdout=subprocess.PIPE)
        return out.communicate()[0].decode().split()[1]
    print("parent", mode(), flush=True)
    pid = os.fork()
    if pid == 0:
        print("child", mode(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
""")


def test_a_forked_controller_starts_its_own_filtered_thread() -> None:
    run = subprocess.run([sys.executable, "-c", SPAWN_AFTER_FORK], capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["parent 2", "child 2"]


def test_each_sandbox_has_its_own_user_namespace(make) -> None:
    first, second = make(), make()
    one = first.exec("readlink /proc/self/ns/user").stdout
    two = second.exec("readlink /proc/self/ns/user").stdout
    assert one and two and one != two
    assert one != os.readlink("/proc/self/ns/user") + "\n"
    assert first.exec("id -u").stdout == "65534\n"


def test_mountinfo_shows_no_host_path(make, workspace: Path, local_backend: LocalBackend) -> None:
    sandbox = make()
    mountinfo = sandbox.exec("cat /proc/self/mountinfo").stdout
    assert " /workspace " in mountinfo
    hidden = [str(workspace), str(workspace.parent), str(local_backend.state_dir), "/work/"]
    for path in hidden:
        assert path not in mountinfo, path
    assert sandbox.info()["workspace_host_path_hidden"] is True
    assert sandbox.exec("cat /workspace/data.csv").stdout == "a\n1\n"
    assert sandbox.exec("touch /workspace/new").exit_code != 0


def test_sandbox_cgroups_sit_inside_the_controllers_own(
    cgroup_backend: LocalBackend, workspace: Path
) -> None:
    own = _cgroup.own_groups(Path("/proc/self/cgroup").read_text())
    mounts = _cgroup.parse_mounts(Path("/proc/self/mounts").read_text())
    layout = cgroup_backend.layout
    assert layout is not None
    for controller, parent in layout.parents.items():
        if layout.version == 1:
            point = next(p for kind, p, opts in mounts if kind == "cgroup" and controller in opts)
            mine = own[controller]
        else:
            point = next(p for kind, p, _ in mounts if kind == "cgroup2")
            mine = own[""]
        assert parent == Path(point, mine.strip("/"), _cgroup.GROUP)
    with cgroup_backend.create(SandboxSpec(workspace=workspace)) as sandbox:
        groups = [Path(g) for g in sandbox.info()["cgroups"]]
        assert groups
        assert all(any(g.parent == p for p in layout.parents.values()) for g in groups)


FORK_UNTIL_EAGAIN = """
import os, sys, time
try:
    for _ in range(64):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
except BlockingIOError as exc:
    print("fork refused", exc.errno)
sys.stdout.flush()
os._exit(7)
"""


def test_a_fork_refused_with_eagain_is_not_reported_as_killed(
    cgroup_backend: LocalBackend, workspace: Path
) -> None:
    limits = Limits(pids=16)
    with cgroup_backend.create(SandboxSpec(workspace=workspace, limits=limits)) as sandbox:
        result = sandbox.exec(["python3", "-c", FORK_UNTIL_EAGAIN], timeout=60)
        assert (result.exit_code, result.status, result.timed_out) == (7, "ok", False)
        assert "fork refused 11" in result.stdout
        # What it left at the limit was killed with its group: the sandbox is usable.
        assert sandbox.exec("echo usable").stdout == "usable\n"
        assert "python3" not in sandbox.exec("cat /proc/[0-9]*/comm").stdout


def test_collect_stops_every_process_first(make, tmp_path: Path) -> None:
    sandbox = make()
    sandbox.exec("(while :; do echo x >> /output/log.txt; done) > /dev/null 2>&1 &")
    sandbox.exec("sleep 600 > /dev/null 2>&1 &")
    namespace, init = sandbox.info()["pid_namespace"], sandbox.info()["init_pid"]
    sandbox.collect(tmp_path / "out")
    # Killed processes may still be zombies for a moment (their reaper is PID 1): dead,
    # but listed. Nothing else of the namespace is left.
    alive = [
        pid
        for pid in os.listdir("/proc")
        if pid.isdigit() and _namespace(pid) == namespace and int(pid) != init
    ]
    running = [pid for pid in alive if _procfs.running(int(pid))]
    assert running == [], [Path(f"/proc/{pid}/stat").read_text()[:200] for pid in running]
    size = (tmp_path / "out" / "log.txt").stat().st_size
    assert sandbox.read_file("log.txt") == (tmp_path / "out" / "log.txt").read_bytes()
    assert len(sandbox.read_file("log.txt")) == size


def test_collect_of_100000_files_is_bounded_and_reported(make, tmp_path: Path) -> None:
    sandbox = make()
    made = sandbox.exec(
        ["python3", "-c", "import os\nfor i in range(100000): os.close(os.open("
         "f'/output/f{i:06d}', os.O_CREAT | os.O_WRONLY))"],
        timeout=170,
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    started = time.monotonic()
    copied = sandbox.collect(tmp_path / "out")
    seconds = time.monotonic() - started
    report = sandbox.collect_report
    assert report is not None
    assert len(copied) == report["files"] == report["limits"]["files"] == 10_000
    assert len(list((tmp_path / "out").iterdir())) == 10_000
    assert report["listing_cut"] is True and report["entries_seen"] == 50_000
    assert sum(report["skipped"].values()) == 40_001  # the rest of the listing, and one more
    assert report["skipped_examples"]
    assert seconds < 120  # bounded, not timed: a generous bound that only a hang exceeds


def _namespace(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def test_the_wall_clock_starts_when_the_sandbox_is_ready(
    local_backend: LocalBackend, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow creation (a loaded host; here a 2.5 s pause before the init starts) does not
    use up the sandbox's wall clock: it counts from the moment the sandbox is ready, as a
    pod's does, and PID 1 and the controller agree on it."""
    start_init = LocalSandbox._start_init

    def slow_start(self: LocalSandbox, ws: Path) -> dict[str, float]:
        time.sleep(2.5)
        return start_init(self, ws)

    monkeypatch.setattr(LocalSandbox, "_start_init", slow_start)
    began = time.monotonic()
    sandbox = local_backend.create(SandboxSpec(workspace=workspace, limits=Limits(wall_seconds=2)))
    try:
        ready = time.monotonic()
        assert ready - began >= 2.5
        done = sandbox.exec("true")
        assert (done.status, done.exit_code) == ("ok", 0)
        left = sandbox.info()["seconds_left"]
        assert 0 < left <= 2
        # Past its two seconds, PID 1 ends what still runs.
        late = sandbox.exec("sleep 30", timeout=60)
        assert late.status == "deadline" and late.timed_out
        assert time.monotonic() - ready < 10
    finally:
        sandbox.close()
