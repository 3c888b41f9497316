"""The sandbox contract as a test suite that every backend runs.

Subclass :class:`SandboxContract` in a ``test_*.py`` module and provide a ``backend``
fixture; override :meth:`SandboxContract.spec` when the backend stages workspaces from
somewhere else than a local folder. Everything here uses only the ``Sandbox`` and
``SandboxBackend`` protocols.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dataspace.errors import SandboxClosedError
from dataspace.sandbox import Limits, Sandbox, SandboxBackend, SandboxSpec

MakeSandbox = Callable[..., Sandbox]

WORKSPACE_CSV = "id,name\n1,alpha\n2,beta\n"

# Prints the root's names joined by "/", then "<path> <size or ->" for every entry below.
WALK_WORKSPACE = """
import os
print("/".join(sorted(os.listdir("/workspace"))))
for top, dirs, files in os.walk("/workspace"):
    for name in dirs + files:
        path = os.path.join(top, name)
        size = "-" if name in dirs else os.stat(path).st_size
        print(os.path.relpath(path, "/workspace"), size)
"""


def _entry(line: str) -> tuple[str, int | None]:
    path, size = line.rsplit(" ", 1)
    return path, None if size == "-" else int(size)


@pytest.mark.sandbox
class SandboxContract:
    """Behaviour every sandbox backend owes its callers."""

    deadline_seconds = 1.0
    """``wall_seconds`` of the deadline test; a backend that starts slowly may raise it."""

    # -- fixtures and hooks ----------------------------------------------------------

    @pytest.fixture
    def backend(self) -> SandboxBackend:
        raise NotImplementedError("a backend's test module provides the backend fixture")

    @pytest.fixture
    def workspace(self, tmp_path: Path) -> Path:
        folder = tmp_path / "workspace"
        (folder / "docs").mkdir(parents=True)
        (folder / "data.csv").write_text(WORKSPACE_CSV)
        (folder / "docs" / "notes.md").write_text("# notes\n")
        return folder

    def spec(self, workspace: Path, limits: Limits, env: dict[str, str]) -> SandboxSpec:
        """The spec of a sandbox over ``workspace``; backends may stage it differently."""
        return SandboxSpec(
            workspace=workspace, limits=limits, env=env, labels={"suite": "contract"}
        )

    @pytest.fixture
    def make_sandbox(self, backend: SandboxBackend, workspace: Path) -> Iterator[MakeSandbox]:
        created: list[Sandbox] = []

        def make(env: dict[str, str] | None = None, **limits: float) -> Sandbox:
            sandbox = backend.create(self.spec(workspace, Limits(**limits), env or {}))
            created.append(sandbox)
            return sandbox

        yield make
        for sandbox in created:
            sandbox.close()

    @pytest.fixture
    def sandbox(self, make_sandbox: MakeSandbox) -> Sandbox:
        return make_sandbox()

    # -- exec ------------------------------------------------------------------------

    def test_implements_the_protocols(self, backend: SandboxBackend, sandbox: Sandbox) -> None:
        assert isinstance(backend, SandboxBackend)
        assert isinstance(sandbox, Sandbox)
        assert backend.name
        assert sandbox.id

    def test_exit_codes_are_results_not_errors(self, sandbox: Sandbox) -> None:
        ok = sandbox.exec("exit 0")
        failed = sandbox.exec("exit 3")
        listed = sandbox.exec(["false"])
        assert (ok.exit_code, ok.status, ok.timed_out) == (0, "ok", False)
        assert (failed.exit_code, failed.status) == (3, "ok")
        assert listed.exit_code == 1
        assert ok.duration >= 0

    def test_stdout_and_stderr_are_kept_apart(self, sandbox: Sandbox) -> None:
        result = sandbox.exec("echo to-out; echo to-err >&2")
        assert result.stdout == "to-out\n"
        assert result.stderr == "to-err\n"

    def test_a_list_command_is_not_split_by_a_shell(self, sandbox: Sandbox) -> None:
        result = sandbox.exec(["printf", "%s|", "a b", "$HOME", "c;d"])
        assert result.stdout == "a b|$HOME|c;d|"

    def test_large_output_is_read_without_blocking(self, sandbox: Sandbox) -> None:
        result = sandbox.exec("head -c 300000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero >&2")
        assert result.exit_code == 0
        assert result.stdout == "a" * 300000
        assert len(result.stderr) == 200000

    def test_timeout_kills_the_command(self, sandbox: Sandbox) -> None:
        result = sandbox.exec("echo started; sleep 30", timeout=0.5)
        assert result.timed_out is True
        assert result.status == "timeout"
        assert result.exit_code is None
        assert "started" in result.stdout
        after = sandbox.exec("echo still-usable")
        assert (after.status, after.stdout) == ("ok", "still-usable\n")

    def test_default_cwd_is_output_and_cwd_is_honoured(self, sandbox: Sandbox) -> None:
        assert sandbox.exec("pwd").stdout == "/output\n"
        assert sandbox.exec("pwd", cwd="/workspace/docs").stdout == "/workspace/docs\n"
        sandbox.exec("mkdir -p sub/dir")
        assert sandbox.exec("pwd", cwd="sub/dir").stdout == "/output/sub/dir\n"
        assert sandbox.exec("cat data.csv", cwd="/workspace").stdout == WORKSPACE_CSV

    def test_environment_is_clean_plus_spec_and_exec_variables(
        self, make_sandbox: MakeSandbox, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("DATASPACE_CONTRACT_SECRET", "controller-only-value")
        sandbox = make_sandbox(env={"SPEC_VAR": "from-spec", "SHARED": "spec"})
        result = sandbox.exec("env", env={"EXEC_VAR": "from-exec", "SHARED": "exec"})
        variables = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        assert variables["HOME"] == "/tmp"
        assert variables["TMPDIR"] == "/tmp"
        assert variables["LANG"] == "C.UTF-8"
        assert variables["SPEC_VAR"] == "from-spec"
        assert variables["EXEC_VAR"] == "from-exec"
        assert variables["SHARED"] == "exec"
        assert "controller-only-value" not in result.stdout
        assert "EXEC_VAR" not in sandbox.exec("env").stdout

    def test_python_with_pandas_runs(self, sandbox: Sandbox) -> None:
        script = "import pandas; print(pandas.read_csv('/workspace/data.csv')['name'].tolist())"
        result = sandbox.exec(["python3", "-c", script])
        assert result.exit_code == 0, result.stderr
        assert result.stdout == "['alpha', 'beta']\n"

    def test_commands_run_concurrently(self, sandbox: Sandbox) -> None:
        results: dict[str, str] = {}

        def run(name: str, command: str) -> None:
            results[name] = sandbox.exec(command).stdout

        threads = [
            threading.Thread(target=run, args=("slow", "sleep 0.3; echo slow")),
            threading.Thread(target=run, args=("fast", "echo fast")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == {"slow": "slow\n", "fast": "fast\n"}

    def test_deadline_ends_commands_and_refuses_new_ones(self, make_sandbox: MakeSandbox) -> None:
        sandbox = make_sandbox(wall_seconds=self.deadline_seconds)
        running = sandbox.exec("sleep 60", timeout=120)
        assert running.status == "deadline"
        assert running.timed_out is True
        refused = sandbox.exec("true")
        assert refused.status == "deadline"
        assert refused.exit_code is None

    # -- workspace and files ---------------------------------------------------------

    def test_workspace_is_readable_and_read_only(self, sandbox: Sandbox) -> None:
        assert sandbox.exec("cat /workspace/data.csv").stdout == WORKSPACE_CSV
        for command in ("echo x > /workspace/new.txt", "rm /workspace/data.csv"):
            assert sandbox.exec(command).exit_code != 0
        assert sandbox.exec("cat /workspace/data.csv").stdout == WORKSPACE_CSV

    def test_workspace_lists_every_staged_file(
        self, make_sandbox: MakeSandbox, workspace: Path
    ) -> None:
        """An agent's first step: ``ls`` and Python list every staged file, nested ones too."""
        deep = workspace / "docs" / "deep" / "deeper"
        deep.mkdir(parents=True)
        (deep / "rows.json").write_text('[{"id": 1}]\n')
        (workspace / "说明.md").write_text("中文说明\n")
        (workspace / "empty").mkdir()
        staged = {
            path.relative_to(workspace).as_posix(): path.stat().st_size if path.is_file() else None
            for path in workspace.rglob("*")
        }
        folders = ["", *sorted(name for name, size in staged.items() if size is None)]
        sandbox = make_sandbox()
        walked = sandbox.exec(["python3", "-c", WALK_WORKSPACE])
        assert walked.exit_code == 0, walked.stderr
        root_line, *entries = walked.stdout.splitlines()
        top = sorted(name for name in staged if "/" not in name)
        assert root_line.split("/") == top, f"os.listdir: {root_line!r}, staged: {top}"
        found = dict(_entry(line) for line in entries)
        assert found == staged, f"os.walk: {found}, staged: {staged}"
        listed: dict[str, int | None] = {}
        for folder in folders:
            result = sandbox.exec(["ls", "-la", f"/workspace/{folder}".rstrip("/")])
            assert result.exit_code == 0, result.stderr
            for line in result.stdout.splitlines()[1:]:  # after "total N"
                mode, _, _, _, size, *_, name = line.split(None, 8)
                if name not in (".", ".."):
                    key = f"{folder}/{name}".lstrip("/")
                    listed[key] = None if mode.startswith("d") else int(size)
        assert listed == staged, f"ls -la: {listed}, staged: {staged}"
        assert sandbox.exec("touch /workspace/docs/deep/deeper/new").exit_code != 0

    def test_write_then_read(self, sandbox: Sandbox) -> None:
        payload = bytes(range(256)) * 4
        sandbox.write_file("answer/prediction.csv", b"id\n1\n")
        sandbox.write_file("/output/blob.bin", payload)
        assert sandbox.read_file("/output/answer/prediction.csv") == b"id\n1\n"
        assert sandbox.read_file("blob.bin") == payload
        sandbox.write_file("blob.bin", b"replaced")
        assert sandbox.read_file("blob.bin") == b"replaced"

    def test_commands_and_file_calls_share_the_output_folder(self, sandbox: Sandbox) -> None:
        sandbox.write_file("notes/in.txt", b"from the controller\n")
        result = sandbox.exec(
            "cat notes/in.txt && echo appended >> notes/in.txt && echo made > out.txt"
        )
        assert result.exit_code == 0, result.stderr
        assert sandbox.read_file("notes/in.txt") == b"from the controller\nappended\n"
        assert sandbox.read_file("out.txt") == b"made\n"

    @pytest.mark.parametrize(
        "path",
        ["../escape.txt", "a/../../escape.txt", "/etc/passwd", "/workspace/data.csv", "/outputx/a"],
    )
    def test_paths_outside_output_are_refused(self, sandbox: Sandbox, path: str) -> None:
        with pytest.raises(PermissionError):
            sandbox.read_file(path)
        with pytest.raises(PermissionError):
            sandbox.write_file(path, b"x")

    def test_symbolic_links_are_never_followed(self, sandbox: Sandbox, tmp_path: Path) -> None:
        canary = tmp_path / "canary.txt"
        canary.write_text("host-only")
        made = sandbox.exec(
            f"ln -s {canary} host_link && ln -s /etc/passwd passwd_link && ln -s / root_link "
            "&& echo inside > real.txt && ln -s real.txt rel_link && mkdir d && ln -s d d_link"
        )
        assert made.exit_code == 0, made.stderr
        for path in ("host_link", "passwd_link", "root_link/etc/passwd", "rel_link", "d_link/x"):
            with pytest.raises(PermissionError):
                sandbox.read_file(path)
        for path in ("host_link", "rel_link", "d_link/new.txt", "root_link/tmp/x"):
            with pytest.raises(PermissionError):
                sandbox.write_file(path, b"overwritten")
        assert canary.read_text() == "host-only"
        assert sandbox.read_file("real.txt") == b"inside\n"
        assert sandbox.exec("ls d").stdout == ""

    def test_missing_files_and_folders_are_reported(self, sandbox: Sandbox) -> None:
        sandbox.exec("mkdir -p folder")
        with pytest.raises(FileNotFoundError):
            sandbox.read_file("nothing-here.txt")
        with pytest.raises(IsADirectoryError):
            sandbox.read_file("folder")

    def test_read_is_size_limited(self, sandbox: Sandbox) -> None:
        sandbox.write_file("big.bin", b"x" * 5000)
        assert len(sandbox.read_file("big.bin", max_bytes=5000)) == 5000
        with pytest.raises(OSError) as caught:
            sandbox.read_file("big.bin", max_bytes=4999)
        assert caught.value.errno == errno.EFBIG

    def test_special_files_are_refused_without_blocking(self, sandbox: Sandbox) -> None:
        assert sandbox.exec("mkfifo pipe").exit_code == 0
        with pytest.raises(PermissionError):
            sandbox.read_file("pipe")

    def test_collect_copies_regular_files_only(self, sandbox: Sandbox, tmp_path: Path) -> None:
        sandbox.write_file("prediction.csv", b"a\n1\n")
        made = sandbox.exec(
            "mkdir -p deep/er && echo nested > deep/er/file.txt && ln -s /etc/passwd link "
            "&& ln -s deep dir_link && mkfifo fifo"
        )
        assert made.exit_code == 0, made.stderr
        dest = tmp_path / "collected"
        copied = sandbox.collect(dest)
        assert sorted(p.relative_to(dest).as_posix() for p in copied) == [
            "deep/er/file.txt",
            "prediction.csv",
        ]
        assert (dest / "prediction.csv").read_bytes() == b"a\n1\n"
        assert (dest / "deep/er/file.txt").read_text() == "nested\n"
        assert not (dest / "link").exists()
        assert not (dest / "dir_link").exists()

    def test_output_size_is_limited(self, make_sandbox: MakeSandbox, tmp_path: Path) -> None:
        sandbox = make_sandbox(output_bytes=256 * 1024)
        sandbox.exec("head -c 1000000 /dev/zero > big.bin; echo small > small.txt")
        copied = sandbox.collect(tmp_path / "collected")
        assert sum(p.stat().st_size for p in copied) <= 256 * 1024

    # -- lifecycle -------------------------------------------------------------------

    def test_info_says_how_limits_are_enforced(self, sandbox: Sandbox) -> None:
        info = sandbox.info()
        assert isinstance(info["enforcement"], str) and info["enforcement"]

    def test_info_holds_the_runtime_identity_the_sandbox_sees(self, sandbox: Sandbox) -> None:
        from dataspace.sandbox import workbench

        shown = sandbox.exec(["cat", workbench.MANIFEST_PATH])
        assert shown.exit_code == 0, shown.stderr
        identity = workbench.manifest_identity(workbench.parse_manifest(shown.stdout.encode()))
        assert identity["runtime"] == "Data Workbench Runtime"
        assert sandbox.info()["runtime"] == identity

    def test_close_is_idempotent_and_final(self, sandbox: Sandbox, tmp_path: Path) -> None:
        sandbox.close()
        sandbox.close()
        calls: list[Callable[[], object]] = [
            lambda: sandbox.exec("true"),
            lambda: sandbox.read_file("x"),
            lambda: sandbox.write_file("x", b""),
            lambda: sandbox.collect(tmp_path / "after-close"),
            lambda: sandbox.info(),
        ]
        for call in calls:
            with pytest.raises(SandboxClosedError):
                call()
