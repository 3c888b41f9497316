"""The docker backend on Debian's Docker daemon: the workbench probes and what a container
keeps out (network, keys, other attempts, a fork bomb) and leaves behind (the contract suite
runs on it from ``test_sandbox_contract.py``).

Skipped, with the reason, where no Docker daemon answers or the runtime image is missing
(``scripts/dev.sh`` as root starts the daemon and builds the image).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_sandbox_hardening import KEYRING
from test_sandbox_isolation import GOLD_SENTINEL, REPO, wait_until
from test_sandbox_workbench import (
    test_ffprobe_reads_the_demo_video,  # noqa: F401  (run here on a container)
    test_pdftotext_extracts_the_demo_pdf,  # noqa: F401
    test_sqlite_jq_and_ripgrep_run,  # noqa: F401
    test_tesseract_has_english_and_simplified_chinese,  # noqa: F401
    test_the_controllers_python_is_not_visible,  # noqa: F401
    test_the_workbench_python_is_the_official_one,  # noqa: F401
    test_tools_md_and_the_manifest_are_at_the_official_paths,  # noqa: F401
)
from test_sandbox_workbench import workspace as workbench_workspace  # noqa: F401

from dataspace.errors import SandboxError
from dataspace.sandbox import Limits, SandboxSpec, get_backend, rootfs, workbench
from dataspace.sandbox.docker import DockerBackend, DockerSandbox
from dataspace.sandbox.docker.sandbox import LABEL

pytestmark = pytest.mark.sandbox

MakeSandbox = Callable[..., DockerSandbox]


def open_docker_backend() -> DockerBackend:
    """The docker backend, or a skip saying why this host cannot run it."""
    try:
        backend = get_backend("docker")
        backend.runtime_identity({}, None)  # the runtime image is there
    except SandboxError as exc:
        pytest.skip(f"docker sandbox backend unavailable here: {exc}")
    assert isinstance(backend, DockerBackend)
    return backend


@pytest.fixture(scope="module")
def docker_backend() -> DockerBackend:
    return open_docker_backend()


# -- the workbench: the local backend's probes, run on one container --------------------


@pytest.fixture(scope="module")
def workspace(workbench_workspace: Path) -> Path:  # noqa: F811
    return workbench_workspace


@pytest.fixture(scope="module")
def sandbox(docker_backend: DockerBackend, workspace: Path) -> Iterator[DockerSandbox]:
    with docker_backend.create(SandboxSpec(workspace=workspace)) as box:
        yield box  # type: ignore[misc]


def test_the_image_shows_the_debian_root_every_backend_shows(sandbox: DockerSandbox) -> None:
    """Guards the container's files drifting from the local sandbox's (one Debian 12 root)."""
    root = rootfs.debian_root(workbench.RUNTIME_ROOT)
    shown = sandbox.exec("cat /etc/debian_version; dpkg-query -W -f='${Version}' ffmpeg python3.11")
    expected = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "ffmpeg", "python3.11"],
        env={"DPKG_ADMINDIR": str(root / "var/lib/dpkg"), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shown.stdout == (root / "etc/debian_version").read_text() + expected
    manifest = json.loads(Path(workbench.RUNTIME_ROOT, workbench.MANIFEST_NAME).read_text())
    assert sandbox.info()["runtime"] == workbench.manifest_identity(manifest)


SEEN_BY_THE_AGENT = textwrap.dedent(
    r"""
    cat /etc/debian_version /etc/os-release
    for tool in ffmpeg ffprobe; do "$tool" -version | head -1; done
    pdftotext -v 2>&1 | head -1
    tesseract --version 2>&1 | head -1
    tesseract --list-langs 2>&1 | sort
    sqlite3 --version; jq --version; rg --version | head -1; socat -V | sed -n 2p
    command -v python3 python3.11 bash sh
    python3 -c 'import sys; print(sys.version)'
    python3 -c 'import importlib.metadata as m
    for d in sorted(d.metadata["Name"].lower() + "==" + d.version for d in m.distributions()):
        print(d)'
    cd /opt/dataspace && sha256sum TOOLS.md capabilities.json runtime-manifest.json
    """
)


def test_a_container_shows_the_agent_what_a_local_sandbox_shows(
    sandbox: DockerSandbox, cgroup_backend: Any, workspace: Path
) -> None:
    """Guards the two backends drifting apart: the Debian release, the workbench tools'
    versions, the Python and its packages and the workbench files are the same in a
    container and a local sandbox (both show the one Debian 12 root)."""
    in_container = sandbox.exec(SEEN_BY_THE_AGENT, timeout=120)
    with cgroup_backend.create(SandboxSpec(workspace=workspace)) as local:
        in_local = local.exec(SEEN_BY_THE_AGENT, timeout=120)
    assert in_container.exit_code == 0, in_container.stderr
    assert in_local.exit_code == 0, in_local.stderr
    assert in_container.stdout.startswith("12.")
    assert "\nnumpy==" in in_container.stdout and "\nffmpeg version " in in_container.stdout
    assert in_container.stdout == in_local.stdout


CLUSTER_IMAGE = os.environ.get("DATASPACE_K8S_IMAGE", "dataspace/runtime:dev")
"""The cluster's runtime image as ``images/build.sh --runtime-only`` tags it."""


def test_the_cluster_image_shows_the_agent_what_a_container_shows(
    sandbox: DockerSandbox, workspace: Path
) -> None:
    """Guards the cluster's runtime image drifting from the docker backend's: built on it
    (images/Dockerfile.runtime adds only the harnesses), a pod's container shows the agent
    the same Debian release, tools, Python packages and workbench files."""
    try:
        cluster = DockerBackend(image=CLUSTER_IMAGE, sweep=False)
        DockerBackend.runtime_identity({}, CLUSTER_IMAGE)  # the image itself, not the default
    except SandboxError as exc:
        pytest.skip(f"no cluster image here (images/build.sh --runtime-only builds it): {exc}")
    with cluster.create(SandboxSpec(workspace=workspace)) as box:
        in_cluster = box.exec(SEEN_BY_THE_AGENT, timeout=120)
        harnesses = box.exec("ls /opt/dataspace/harnesses")
    in_container = sandbox.exec(SEEN_BY_THE_AGENT, timeout=120)
    assert in_cluster.exit_code == 0, in_cluster.stderr
    assert in_cluster.stdout.startswith("12.") and "\nnumpy==" in in_cluster.stdout
    assert in_cluster.stdout == in_container.stdout
    assert harnesses.stdout.split() == ["claude-code", "codex", "smolagents"]


# -- what a container keeps out ---------------------------------------------------------


@pytest.fixture
def release_workspace(tmp_path: Path) -> Path:
    """A release laid out as the official one: the workspace is one task's context."""
    release = tmp_path / "release"
    context = release / "input" / "task_1" / "context"
    context.mkdir(parents=True)
    (context / "sales.csv").write_text("region,amount\nnorth,3\n")
    gold = release / "output" / "task_1" / "gold.csv"
    gold.parent.mkdir(parents=True)
    gold.write_text(f"answer\n{GOLD_SENTINEL}\n")
    return context


@pytest.fixture
def make(docker_backend: DockerBackend, release_workspace: Path) -> Iterator[MakeSandbox]:
    created: list[DockerSandbox] = []

    def make_sandbox(**limits: float) -> DockerSandbox:
        spec = SandboxSpec(workspace=release_workspace, limits=Limits(**limits))
        created.append(docker_backend.create(spec))
        return created[-1]

    yield make_sandbox
    for box in created:
        box.close()


def test_no_network_not_even_the_hosts_loopback(make: MakeSandbox) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
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
    assert result.stdout.count("refused") == 2 and "connected" not in result.stdout
    assert make().exec("cat /proc/net/route").stdout.count("\n") <= 1  # header only


def test_no_key_in_the_environment_or_files(
    make: MakeSandbox, release_workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-4b1d")
    sandbox = make()
    found = sandbox.exec("env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert "secret-4b1d" not in found.stdout
    gold = release_workspace.parents[2] / "output" / "task_1" / "gold.csv"
    for command in (f"cat {gold}", "cat /workspace/../output/task_1/gold.csv",
                    f"cat /proc/1/root{gold}", f"test -e {REPO / 'dataspace'}"):  # fmt: skip
        result = sandbox.exec(command)
        assert result.exit_code != 0 and GOLD_SENTINEL not in result.stdout, command
    search = sandbox.exec(f"grep -rls {GOLD_SENTINEL} / --exclude-dir=proc --exclude-dir=sys",
                          timeout=120)  # fmt: skip
    assert search.stdout == ""


def test_commands_run_unprivileged(make: MakeSandbox) -> None:
    result = make().exec("id -u; id -g; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    lines = result.stdout.split()
    assert lines[:2] == ["65534", "65534"]
    assert lines[lines.index("CapEff:") + 1] == "0000000000000000"
    assert lines[lines.index("NoNewPrivs:") + 1] == "1"


def test_no_channel_between_attempts(make: MakeSandbox) -> None:
    """Nothing one attempt leaves (a key, a file in /tmp or /dev/shm) reaches the next."""
    first = make()
    added = first.exec(["python3", "-c", KEYRING, "add"])
    assert added.exit_code == 0, added.stderr
    assert [line.split()[1] for line in added.stdout.splitlines()] == ["-1", "-1"]
    first.exec("echo left > /tmp/left; echo left > /dev/shm/left 2>/dev/null; true")
    first.close()
    second = make()
    found = second.exec(["python3", "-c", KEYRING, "search"])
    assert [line.split()[1] for line in found.stdout.splitlines()] == ["-1", "-1"]
    assert second.exec("cat /tmp/left /dev/shm/left").stdout == ""


def test_timeout_kills_everything_the_command_started(make: MakeSandbox) -> None:
    sandbox = make()
    result = sandbox.exec(
        "sleep 300 & (setsid sleep 301 > /dev/null 2>&1 &); "
        "nohup sleep 302 > /dev/null 2>&1 & sleep 303",
        timeout=1,
    )
    assert (result.status, result.timed_out) == ("timeout", True)
    left = sandbox.exec("cat /proc/[0-9]*/comm").stdout.split()
    assert left.count("sleep") == 1, left  # the container's keeper, ``sleep infinity``, alone


def pids_file(name: str) -> str:
    """Reads the container's own pids counter ``name`` (cgroup v2 or v1), from inside."""
    return f"cat /sys/fs/cgroup/pids.{name} 2>/dev/null || cat /sys/fs/cgroup/pids/pids.{name}"


def test_fork_bomb_is_contained(make: MakeSandbox) -> None:
    sandbox = make(pids=48, cpus=0.5)
    result = sandbox.exec("(bomb() { bomb | bomb & }; bomb) & while :; do :; done", timeout=3)
    assert (result.status, result.timed_out) == ("resource_limit", True)
    assert sandbox.exec(pids_file("max")).stdout == "48\n"
    assert sandbox.exec("echo survived").stdout == "survived\n"
    # init, keeper, and the reading command's wrapper, timer, shell and cat: the bomb is gone
    assert wait_until(lambda: int(sandbox.exec(pids_file("current")).stdout) <= 6)


def test_memory_limit(make: MakeSandbox) -> None:
    sandbox = make(memory_bytes=64 * 1024**2)
    result = sandbox.exec(["python3", "-c", "data = b'x' * (128 * 1024 * 1024)"], timeout=60)
    assert (result.exit_code, result.status) != (0, "ok")
    assert result.status == "resource_limit"
    assert sandbox.exec("echo alive").stdout == "alive\n"


def test_tmp_and_output_are_size_limited(make: MakeSandbox) -> None:
    sandbox = make(tmp_bytes=1024 * 1024, output_bytes=1024 * 1024)
    assert sandbox.exec("head -c 3000000 /dev/zero > /tmp/big").exit_code != 0
    assert sandbox.exec("head -c 3000000 /dev/zero > /output/big").exit_code != 0
    assert sandbox.exec("touch /etc/x /usr/x /opt/dataspace/x").exit_code != 0


def test_close_leaves_no_container(make: MakeSandbox, docker_backend: DockerBackend) -> None:
    sandbox = make()
    sandbox.exec("sleep 600 > /dev/null 2>&1 &")
    top = [docker_backend.docker, "top", sandbox.id, "-o", "pid,comm"]

    def sleeping() -> int:
        return subprocess.run(top, capture_output=True, text=True).stdout.split().count("sleep")

    assert wait_until(lambda: sleeping() == 2)  # the keeper and the one left behind
    sandbox.close()
    listed = subprocess.run(
        [docker_backend.docker, "ps", "--all", "--quiet", "--filter", f"{'name'}={sandbox.id}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert listed == ""


CRASHING_CONTROLLER = """
import json, sys
from dataspace.sandbox import SandboxSpec, get_backend
backend = get_backend("docker", sweep=False)
sandbox = backend.create(SandboxSpec(workspace=sys.argv[1], labels={"run": sys.argv[2]}))
print(sandbox.id, flush=True)
sandbox.exec("sleep 1000")
"""


def test_a_crashed_controllers_container_is_swept(
    docker_backend: DockerBackend, release_workspace: Path
) -> None:
    import os
    import sys

    run = f"sweep-{os.getpid()}"
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING_CONTROLLER, str(release_workspace), run],
        stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    assert child.stdout is not None
    container = child.stdout.readline().strip()
    child.kill()
    child.wait()
    label = f"label={LABEL}={container}"
    listed = [docker_backend.docker, "ps", "--all", "--quiet", "--filter", label]
    assert subprocess.run(listed, capture_output=True, text=True).stdout.strip()
    assert docker_backend.sweep({"run": run}) == 1
    assert subprocess.run(listed, capture_output=True, text=True).stdout.strip() == ""


def test_the_example_spec_is_the_official_baseline_on_docker() -> None:
    from dataspace.runs.spec import load_spec

    spec = load_spec(REPO / "examples" / "docker-baseline.yaml")
    assert spec.sandbox.backend == "docker"
    assert dict(spec.sandbox.options) == {"image": "dataspace-workbench:1.0"}
    lim = spec.limits
    assert (lim.cpus, lim.memory_bytes, lim.pids, lim.tmp_bytes) == (
        4,
        16 * 1024**3,
        256,
        2 * 1024**3,
    )


# -- no root needed: the same cases as a user of the daemon's socket group --------------

DOCKER_USER = "dataspace-docker-test"
NON_ROOT_CASES = (
    "docker and (timeout or fork_bomb or close_leaves or no_channel or memory_limit or "
    "write_then_read or symbolic or collect or output_size or deadline or concurrently or "
    "runtime_identity)"
)
"""The contract and hostile-sandbox cases run again as a user who only reaches the daemon."""


def _socket_group() -> str:
    """The group of the daemon's Unix socket (``DOCKER_HOST`` or the default path)."""
    import grp
    import os

    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        pytest.skip(f"the daemon is not reached through a local Unix socket ({host})")
    return grp.getgrgid(os.stat(host.removeprefix("unix://")).st_gid).gr_name


def _python_for(user: str, env: dict[str, str]) -> list[str]:
    """A Python of this version the user may run, with this environment's packages."""
    import site
    import sys

    for python in (sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        argv = ["runuser", "-u", user, "--", python]
        probe = subprocess.run([*argv, "-c", "import pytest, dataspace"], env=env,
                               capture_output=True, cwd=REPO)  # fmt: skip
        if probe.returncode == 0:
            return argv
    pytest.skip(f"no Python {sys.version_info[:2]} with {site.getsitepackages()} runs as {user}")


def test_a_user_of_the_daemons_socket_runs_the_backend_without_root(
    docker_backend: DockerBackend,
) -> None:
    """Guards the backend needing root or this host's /proc again: key cases, non-root."""
    import os
    import shutil
    import site
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("making the test user needs root (run as non-root, this suite is the proof)")
    if shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("useradd and runuser are needed to make and become the test user")
    group = _socket_group()
    if subprocess.run(["id", "-u", DOCKER_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        "--groups", group, DOCKER_USER], check=True)  # fmt: skip
    else:
        subprocess.run(["usermod", "-aG", group, DOCKER_USER], check=True)
    home = Path(tempfile.mkdtemp(prefix="dataspace-docker-user-"))
    shutil.chown(home, DOCKER_USER)
    try:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join([str(REPO), *site.getsitepackages()]),
        }
        python = _python_for(DOCKER_USER, env)
        assert subprocess.run([*python, "-c", "import os; assert os.geteuid() != 0"],
                              env=env, cwd=REPO).returncode == 0  # fmt: skip
        done = subprocess.run(
            [*python, "-m", "pytest", "tests/sandbox/test_sandbox_docker.py",
             "tests/sandbox/test_sandbox_contract.py", "-k", NON_ROOT_CASES,
             "-p", "no:cacheprovider", "-q", "-rs", f"--basetemp={home / 'pytest'}"],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
    finally:
        shutil.rmtree(home, ignore_errors=True)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "passed" in summary and "skipped" not in summary, done.stdout[-4000:]
