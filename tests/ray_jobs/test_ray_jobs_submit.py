"""``ray job submit`` of the run entrypoint against a local ``ray start --head``.

The head binds 127.0.0.1 only, with every port chosen free, its own temp folder, usage
statistics and token authentication off (``dataspace.testing.ray_head``). It is started
as from a plain shell: the venv's ``ray`` by its path, the venv not on ``PATH`` (so the
job's ``python`` is not the venv's), with a model key in its environment (the cluster's).
The job is submitted with the command ``docs/cluster.md`` documents.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dataspace.testing.ray_head import RayHead
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(600)]

VENV_BIN = Path(sys.executable).parent
KEY_ENV = "DATASPACE_JOB_TEST_KEY"
SECRET = "sk-job-3f1e0c9b7a5d4e2f8c6b"  # a stand-in key, in the cluster's environment only


def _plain_env() -> dict[str, str]:
    """The environment of a plain shell: the venv is not on PATH, no Ray variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != KEY_ENV}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != VENV_BIN]
    env["PATH"] = os.pathsep.join(path)
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    ray = shutil.which("ray", path=str(VENV_BIN))
    if ray is None:
        pytest.skip("the ray command is not installed in this environment")
    with RayHead(ray, env={**_plain_env(), KEY_ENV: SECRET}, dashboard=True) as head:
        yield head


def _submit(head: RayHead, spec: Path, job_id: str, cwd: Path, **env: str):
    """``ray job submit`` as docs/cluster.md says, from a plain shell in ``cwd``."""
    return subprocess.run(
        [
            str(VENV_BIN / "ray"), "job", "submit", "--address", head.dashboard,
            "--submission-id", job_id, "--",
            str(VENV_BIN / "python"), "-m", "ray_jobs.run", str(spec), "--no-sweep",
        ],
        env={**head.client_env(_plain_env()), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=str(cwd),
    )  # fmt: skip


def _status(head: RayHead, job_id: str, monkeypatch: pytest.MonkeyPatch) -> str:
    from ray.job_submission import JobSubmissionClient

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    return str(JobSubmissionClient(head.dashboard).get_job_status(job_id))


def _actors(head: RayHead, monkeypatch: pytest.MonkeyPatch, **filters: str) -> list[str]:
    """Class names of the cluster's actors (``ray list actors``), with ``filters``."""
    from ray.util.state import list_actors

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    found = list_actors(
        address=head.dashboard,
        filters=[(k, "=", v) for k, v in filters.items()],
        limit=1000,
        raise_on_missing_output=False,
    )
    return sorted(a.class_name for a in found)


def _spec(tmp_path: Path, url: str, *, key_env: str = KEY_ENV) -> Path:
    release = write_tiny_release(tmp_path / "release", tasks=2)
    spec = tmp_path / "spec.yaml"
    react = {
        "name": "react",
        "harness": "dataspace-agent",
        "model": {
            "id": "scripted-model",
            "base_url": url,
            "key_env": key_env,
            "prices": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
        },
    }
    spec.write_text(
        yaml.safe_dump(
            {
                "run_id": "rayjob",
                "release": str(release),
                "store": f"file://{tmp_path / 'store'}",
                "agents": [{"name": "gold", "harness": "gold"}, react],
                "limits": {"model_turns": 2, "wall_seconds": 120, "command_timeout": 30},
                "sandbox": {"backend": "local", "cpus": 1, "memory": "1GiB"},
                "concurrency": 2,
            },
            sort_keys=False,
        )
    )
    return spec


def test_ray_job_submit_runs_a_spec_to_the_end(
    ray_head: RayHead, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the documented job from a plain shell: "No module named 'ray_jobs'", no
    report.md/report.html, and a detached _SemaphoreActor left on the cluster."""
    from dataspace.errors import SandboxError
    from dataspace.sandbox.local import LocalBackend

    try:
        LocalBackend(state_dir=tmp_path / "probe-state")
    except SandboxError as exc:
        pytest.skip(f"the local sandbox cannot run here: {exc}")
    job_id = f"ds-run-{os.getpid()}-{int(time.time())}"
    with ScriptedServer({"*": []}) as srv:
        submit = _submit(ray_head, _spec(tmp_path, srv.url), job_id, tmp_path)
        auth = {
            {k.lower(): v for k, v in r.headers.items()}.get("authorization") for r in srv.requests
        }
    out = submit.stdout + submit.stderr
    assert _status(ray_head, job_id, monkeypatch) == "SUCCEEDED", out[-4000:]
    assert "No module named" not in out
    assert "gold: 2/2 passed (100.00%)" in submit.stdout, out[-4000:]
    assert auth == {f"Bearer {SECRET}"}, auth  # the key came from the cluster's environment
    run = tmp_path / "store" / "runs" / "rayjob"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["agents"]["gold"]["accuracy"] == 1.0
    for name in ("results.parquet", "report.md", "report.html"):
        assert (run / name).is_file(), name
    assert f"report:  file://{run}/report.html" in submit.stdout
    # the run's actors (key holder, model limiter) existed and none outlived the job
    ours = {"KeyHolder", "_SemaphoreActor"}
    assert ours <= set(_actors(ray_head, monkeypatch)), _actors(ray_head, monkeypatch)
    deadline = time.monotonic() + 60
    while ours & set(alive := _actors(ray_head, monkeypatch, state="ALIVE")):
        assert time.monotonic() < deadline, alive
        time.sleep(0.5)


def test_a_job_without_the_key_says_it_belongs_in_the_cluster(
    ray_head: RayHead, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the job's preflight: it asked to export the key "in the shell that runs
    dataspace", where the job (in the cluster's environment) never sees it."""
    missing = "DATASPACE_JOB_TEST_OTHER_KEY"
    job_id = f"ds-nokey-{os.getpid()}-{int(time.time())}"
    with ScriptedServer({"*": []}) as srv:
        spec = _spec(tmp_path, srv.url, key_env=missing)
        # exported in the submitting shell: a job does not get it from there
        submit = _submit(ray_head, spec, job_id, tmp_path, **{missing: "sk-shell-only"})
    out = submit.stdout + submit.stderr
    assert _status(ray_head, job_id, monkeypatch) == "FAILED", out[-4000:]
    line = next((ln for ln in out.splitlines() if f"{missing} is not set" in ln), "")
    assert "in the Ray job's environment" in line and "cluster's environment" in line, out
    assert "ray job submit` does not pass it on" in line, line
    assert "shell that runs dataspace" not in out
    assert not (tmp_path / "store" / "runs" / "rayjob" / "spec.json").exists()


def test_pod_slots_are_shared_by_every_process_of_the_cluster(
    ray_head: RayHead, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the cluster-wide creation limit: one slot pool for all Ray workers."""
    import ray

    from dataspace.sandbox.kubernetes._slots import RaySlots, SlotTimeoutError

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    connected = not ray.is_initialized()
    if connected:
        ray.init(address=ray_head.gcs, log_to_driver=False, configure_logging=False)
    try:
        slots = RaySlots(name=f"dataspace-k8s-slots-test-{os.getpid()}")
        first = slots.acquire("create", 2, timeout=5, ttl=60)
        slots.acquire("create", 2, timeout=5, ttl=60)

        @ray.remote(num_cpus=0)
        def take_one(name: str) -> bool:
            try:
                RaySlots(name=name).acquire("create", 2, timeout=0.3, ttl=60)
            except SlotTimeoutError:
                return False
            return True

        name = f"dataspace-k8s-slots-test-{os.getpid()}"
        assert ray.get(take_one.remote(name)) is False  # another process sees the same pool
        slots.release("create", first)
        assert ray.get(take_one.remote(name)) is True
        assert slots.stats()["peak"]["create"] == 2
        ray.kill(slots.actor)
    finally:
        if connected:
            ray.shutdown()
