"""Model keys reach attempt workers without touching any file or log."""

from __future__ import annotations

import shutil

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
