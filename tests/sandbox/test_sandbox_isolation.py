"""What the local sandbox keeps out and keeps in: network, host files, secrets, resources.

Every test starts real sandboxes; most run twice, with cgroup limits and with rlimits.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dataspace.sandbox import Limits, SandboxSpec, _procfs, workbench
from dataspace.sandbox.local import LocalBackend, LocalSandbox, _procs

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[2]
GOLD_SENTINEL = "GOLD-SENTINEL-7f3a"

MakeSandbox = Callable[..., LocalSandbox]


def processes_in(pid_namespace: int) -> list[int]:
    """Pids (as the host sees them) of every process in a PID namespace."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}/ns/pid").st_ino == pid_namespace:
                    found.append(int(name))
            except OSError:
                continue
    return found


def snapshot(pid_namespace: int) -> list[tuple[int, int]]:
    """(pid, start time) of every process in a PID namespace: who they are, for good."""
    return [(pid, start) for pid, start, _ in _procs.namespace_members(pid_namespace)]


def still_running(members: list[tuple[int, int]]) -> list[int]:
    """Which of ``members`` still run (zombies are dead). Checking by identity, not by the
    namespace inode: a freed namespace's inode number goes to the next one created, maybe a
    concurrent test's sandbox."""
    return [pid for pid, start in members if _procfs.alive(pid, start) and _procfs.running(pid)]


def wait_until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A release laid out as the official one: the workspace is one task's context."""
    release = tmp_path / "release"
    context = release / "input" / "task_1" / "context"
    context.mkdir(parents=True)
    (context / "sales.csv").write_text("region,amount\nnorth,3\n")
    gold = release / "output" / "task_1" / "gold.csv"
    gold.parent.mkdir(parents=True)
    gold.write_text(f"answer\n{GOLD_SENTINEL}\n")
    config = release / "evaluation" / "configs" / "task_1.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"secret": GOLD_SENTINEL}))
    return context


@pytest.fixture
def make(local_backend: LocalBackend, workspace: Path) -> Iterator[MakeSandbox]:
    created: list[LocalSandbox] = []

    def make_sandbox(**limits: float) -> LocalSandbox:
        sandbox = local_backend.create(SandboxSpec(workspace=workspace, limits=Limits(**limits)))
        created.append(sandbox)
        return sandbox

    yield make_sandbox
    for sandbox in created:
        sandbox.close()


def test_no_network_not_even_the_hosts_loopback(make: MakeSandbox) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from here
        script = textwrap.dedent(f"""
            import socket
            for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
                try:
                    socket.socket(family).connect((host, {port}))
                    print("connected", host)
                except OSError as exc:
                    print("refused", host, exc.errno)
        """)
        result = make().exec(["python3", "-c", script], timeout=20)
    assert result.exit_code == 0, result.stderr
    assert "connected" not in result.stdout
    assert result.stdout.count("refused") == 2
    assert make().exec("cat /proc/net/route").stdout.count("\n") <= 1  # header only


def test_release_files_are_invisible_from_inside(make: MakeSandbox, workspace: Path) -> None:
    release = workspace.parents[2]
    gold = release / "output" / "task_1" / "gold.csv"
    sandbox = make()
    assert sandbox.exec("cat /workspace/sales.csv").exit_code == 0
    attempts = [
        f"cat {gold}",
        "cat /workspace/../output/task_1/gold.csv",
        "cat /workspace/../../../output/task_1/gold.csv",
        f"cat /proc/self/root{gold}",
        f"cat /proc/1/root{gold}",
        f"ls {release}",
        f"cat {release}/evaluation/configs/task_1.json",
    ]
    for command in attempts:
        result = sandbox.exec(command)
        assert result.exit_code != 0, command
        assert GOLD_SENTINEL not in result.stdout + result.stderr
    search = sandbox.exec(
        "find / -path /proc -prune -o \\( -name gold.csv -o -name task_1.json \\) -print "
        f"2>/dev/null; grep -rl {GOLD_SENTINEL} /workspace /output /tmp /etc 2>/dev/null",
        timeout=60,
    )
    assert search.stdout == ""
    assert sandbox.exec(f"test -e {REPO / 'dataspace'}").exit_code != 0


def test_no_controller_secret_reaches_the_sandbox(
    make: MakeSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-4b1d")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-test-secret-4b1d")
    result = make().exec("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert "secret-4b1d" not in result.stdout
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines() if "=" in line}
    assert {"PATH", "HOME", "LANG", "TMPDIR"} <= names
    allowed = {"PATH", "HOME", "LANG", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"}
    assert names <= allowed | set(workbench.ENVIRONMENT)


def test_commands_run_unprivileged(make: MakeSandbox) -> None:
    result = make().exec(
        "id -u; id -g; id -G; grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status"
    )
    lines = result.stdout.split()
    assert lines[:3] == ["65534", "65534", "65534"]
    assert "0000000000000000" in lines[lines.index("CapEff:") + 1]
    assert lines[lines.index("NoNewPrivs:") + 1] == "1"


def test_only_the_sandbox_processes_and_devices_are_visible(make: MakeSandbox) -> None:
    sandbox = make()
    pids = sandbox.exec("ls /proc | grep -E '^[0-9]+$'").stdout.split()
    assert "1" in pids and len(pids) < 10
    devices = set(sandbox.exec("ls /dev").stdout.split())
    assert devices <= {"null", "zero", "random", "urandom", "fd", "stdin", "stdout", "stderr"}
    assert sandbox.exec("head -c 4 /dev/urandom | wc -c").stdout.strip() == "4"


def test_tmp_is_writable_and_size_limited(make: MakeSandbox) -> None:
    sandbox = make(tmp_bytes=1024 * 1024)
    assert sandbox.exec("echo scratch > /tmp/a && cat /tmp/a").stdout == "scratch\n"
    assert sandbox.exec("head -c 3000000 /dev/zero > /tmp/big").exit_code != 0


def test_memory_limit(make: MakeSandbox, local_backend: LocalBackend) -> None:
    sandbox = make(memory_bytes=64 * 1024**2)
    result = sandbox.exec(["python3", "-c", "data = b'x' * (128 * 1024 * 1024)"], timeout=60)
    assert result.exit_code != 0
    if local_backend.enforcement == "rlimit":
        assert "MemoryError" in result.stderr  # RLIMIT_AS fails the allocation instead
    else:
        assert result.status == "resource_limit"
    assert sandbox.exec("echo alive").stdout == "alive\n"


def test_timeout_kills_everything_the_command_started(make: MakeSandbox) -> None:
    sandbox = make()
    namespace = sandbox.info()["pid_namespace"]
    result = sandbox.exec(
        "sleep 300 & (setsid sleep 301 > /dev/null 2>&1 &); "
        "nohup sleep 302 > /dev/null 2>&1 & sleep 303",
        timeout=1,
    )
    assert (result.status, result.timed_out) == ("timeout", True)
    init = sandbox.info()["init_pid"]
    assert wait_until(lambda: processes_in(namespace) == [init])


def test_background_processes_of_a_finished_command_keep_running(make: MakeSandbox) -> None:
    sandbox = make()
    started = sandbox.exec("sleep 60 > /dev/null 2>&1 &")
    assert started.status == "ok"
    assert "sleep" in sandbox.exec("cat /proc/[0-9]*/comm").stdout


def test_fork_bomb_is_contained(cgroup_backend: LocalBackend, workspace: Path) -> None:
    limits = Limits(pids=48, cpus=0.5)
    with cgroup_backend.create(SandboxSpec(workspace=workspace, limits=limits)) as sandbox:
        check_fork_bomb(sandbox)


def check_fork_bomb(sandbox: LocalSandbox) -> None:
    # The shell forks once, for the bomb, while the pids are free, then loops on builtins
    # only: a refused fork cannot end it (dash exits at one), so the command ends by its
    # timeout whatever the shell.
    result = sandbox.exec("(bomb() { bomb | bomb & }; bomb) & while :; do :; done", timeout=3)
    assert (result.status, result.timed_out) == ("resource_limit", True)
    groups = [Path(p) for p in sandbox.info()["cgroups"]]
    peak = next(g / "pids.peak" for g in groups if (g / "pids.max").exists())
    if peak.exists():  # pids.peak is recent (Linux 6.1)
        assert int(peak.read_text()) <= 48
    assert sandbox.exec("echo survived").stdout == "survived\n"
    init = sandbox.info()["init_pid"]
    namespace = sandbox.info()["pid_namespace"]
    assert wait_until(lambda: processes_in(namespace) == [init])


def test_close_leaves_nothing_behind(make: MakeSandbox) -> None:
    sandbox = make()
    sandbox.exec("sleep 600 > /dev/null 2>&1 &")
    sandbox.write_file("result.csv", b"a\n")
    info = sandbox.info()
    members = snapshot(info["pid_namespace"])
    assert len(members) >= 2
    sandbox.close()
    assert still_running(members) == []
    for group in info["cgroups"]:
        assert not Path(group).exists()
    assert not Path(str(info["state_dir"])).exists()
    assert str(info["state_dir"]) not in Path("/proc/self/mountinfo").read_text()


CRASHING_CONTROLLER = """
import json, sys
from dataspace.sandbox import SandboxSpec
from dataspace.sandbox.local import LocalBackend

backend = LocalBackend(state_dir=sys.argv[1], enforcement=sys.argv[2], sweep=False)
sandbox = backend.create(SandboxSpec(workspace=sys.argv[3], labels={"run": sys.argv[4]}))
print(json.dumps(sandbox.info()), flush=True)
sandbox.exec("sleep 1000 > /dev/null 2>&1 & exec sleep 1001")
"""


def test_a_killed_controller_leaves_nothing_running(
    local_backend: LocalBackend, workspace: Path
) -> None:
    run_label = f"crash-{os.getpid()}-{time.monotonic_ns()}"
    controller = subprocess.Popen(
        [sys.executable, "-c", CRASHING_CONTROLLER, str(local_backend.state_dir),
         local_backend.enforcement, str(workspace), run_label],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )  # fmt: skip
    try:
        assert controller.stdout is not None
        info = json.loads(controller.stdout.readline())
        namespace = info["pid_namespace"]
        assert wait_until(lambda: len(processes_in(namespace)) >= 3)  # init and two sleeps
        members = snapshot(namespace)
    finally:
        controller.send_signal(signal.SIGKILL)
        controller.wait()
    assert wait_until(lambda: still_running(members) == [])
    assert Path(info["state_dir"]).exists()  # what sweep is for
    removed = local_backend.sweep(labels={"run": run_label})
    assert removed == 1
    assert not Path(info["state_dir"]).exists()
    for group in info["cgroups"]:
        assert not Path(group).exists()
    assert local_backend.sweep(labels={"run": run_label}) == 0


def test_creating_a_backend_sweeps_what_dead_controllers_left(local_backend: LocalBackend) -> None:
    dead_pid = 2**22 + 7  # above the kernel's largest pid: never a live process
    sandbox_id = f"lsb-dead{os.getpid():08x}"
    group = f"{sandbox_id}@{dead_pid}-1"
    entry = local_backend.state_dir / sandbox_id
    (entry / "root").mkdir(parents=True)
    record = {"id": sandbox_id, "controller_pid": dead_pid, "controller_start": 1, "cgroup": group}
    (entry / "owner.json").write_text(json.dumps(record))
    orphan = f"lsb-orphan{os.getpid():08x}@{dead_pid}-1"  # a group with no state folder
    groups = []
    if local_backend.layout is not None:
        for parent in set(local_backend.layout.parents.values()):
            for name in (group, orphan):
                (parent / name).mkdir()
                groups.append(parent / name)
    LocalBackend(state_dir=local_backend.state_dir, enforcement=local_backend.enforcement)
    assert not entry.exists()
    assert [g for g in groups if g.exists()] == []


def test_a_python_installed_under_tmp_stays_visible(
    local_backend: LocalBackend, workspace: Path, tmp_path: Path
) -> None:
    """Guards CI clones under /tmp: the sandbox's own /tmp must not hide the host's venv."""
    prefix = Path(tempfile.mkdtemp(prefix="ds-venv-", dir="/tmp"))
    try:
        (prefix / "bin").mkdir()
        (prefix / "bin" / "tool").write_text("#!/bin/sh\necho from-the-venv\n")
        (prefix / "bin" / "tool").chmod(0o755)
        prefix.chmod(0o755)
        local_backend.system_ops.append(("bind", str(prefix), str(prefix)))
        sandbox = local_backend.create(SandboxSpec(workspace=workspace, limits=Limits()))
        try:
            assert sandbox.exec(f"{prefix}/bin/tool").stdout == "from-the-venv\n"
            assert sandbox.exec("echo x > /tmp/scratch && cat /tmp/scratch").stdout == "x\n"
            assert sandbox.exec(f"touch {prefix}/bin/new").exit_code != 0  # still read-only
        finally:
            sandbox.close()
    finally:
        local_backend.system_ops.remove(("bind", str(prefix), str(prefix)))
        shutil.rmtree(prefix)
