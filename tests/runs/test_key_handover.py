"""Model keys reach attempt workers without touching any file or log."""

from __future__ import annotations

import os
import shutil
import signal

import pytest
from cli_helpers import (
    KEY_ENV,
    SECRET,
    cli_env,
    dataspace,
    files_containing,
    model_agent,
    short_ray_dir,
    write_spec,
)

from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(900),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]


def test_key_is_in_no_file_the_run_or_ray_wrote(tmp_path):
    """Guards the key hand-over: a Ray runtime_env put the key in runtime_env_agent.log."""
    release = write_tiny_release(tmp_path / "release", tasks=2)
    ray_dir = short_ray_dir()
    try:
        with ScriptedServer({"*": []}) as srv:
            spec = write_spec(
                tmp_path / "spec.yaml",
                release,
                tmp_path / "store",
                [model_agent(srv.url)],
                concurrency=2,
            )
            proc = dataspace("run", str(spec), env=cli_env(ray_dir, **{KEY_ENV: SECRET}))
            auth = {
                {k.lower(): v for k, v in r.headers.items()}.get("authorization")
                for r in srv.requests
            }
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out
        assert "model_turns_exhausted" in out
        # the attempts (in Ray workers) did call the model with the controller's key
        assert auth == {f"Bearer {SECRET}"}, auth
        sessions = list(ray_dir.rglob("session_*"))
        assert sessions, f"no Ray session under {ray_dir}"
        assert list(ray_dir.rglob("runtime_env_agent.log")) or list(ray_dir.rglob("raylet.out"))
        leaks = files_containing(tmp_path, SECRET.encode()) + files_containing(
            ray_dir, SECRET.encode()
        )
        assert not leaks, leaks
        assert SECRET not in out
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


@pytest.mark.parametrize(
    "command", [["dataspace.cli", "run"], ["ray_jobs.run"]], ids=["dataspace-run", "ray-jobs-run"]
)
def test_no_process_but_the_controller_has_the_key_in_its_environment(tmp_path, command):
    """Guards the local Ray's environment: every Ray process (GCS, raylet, dashboard, workers)
    started with the model key of the CLI's environment."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from dataspace.testing.ray_head import descendants

    release = write_tiny_release(tmp_path / "release", tasks=1)
    ray_dir = short_ray_dir()
    # the attempt's first model call is held until the scan is done: the run is surely live
    held = [{"faults": [{"wait": "scanned"}], "content": "thinking"}]
    try:
        with ScriptedServer({"*": [], "task_1": held}) as srv:
            spec = write_spec(
                tmp_path / "spec.yaml", release, tmp_path / "store", [model_agent(srv.url)]
            )
            proc = subprocess.Popen(
                [sys.executable, "-m", *command, str(spec)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=cli_env(ray_dir, **{KEY_ENV: SECRET}),
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + 240
                while srv.served("task_1", 0) == 0:
                    assert proc.poll() is None, proc.communicate()[0]
                    assert time.monotonic() < deadline, "the attempt never called the model"
                    time.sleep(0.1)
                family = descendants(proc.pid)
                holders, commands = [], []
                for pid in sorted(family):
                    try:
                        environ = Path(f"/proc/{pid}/environ").read_bytes()
                        commands.append(Path(f"/proc/{pid}/cmdline").read_bytes())
                    except OSError:  # ended meanwhile
                        continue
                    if SECRET.encode() in environ:
                        holders.append(pid)
                srv.open_gate("scanned")
                out, _ = proc.communicate(timeout=300)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    assert proc.returncode == 0, out
    # the scan saw Ray's own processes and the attempt's worker, and the controller's key
    seen = b"\n".join(commands)
    for name in (b"gcs_server", b"raylet", b"run_attempt"):
        assert name in seen, (name, seen[:3000])
    assert holders == [proc.pid], holders
