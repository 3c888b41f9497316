"""One live invocation per run: the run's lease, through the CLI (file:// and s3:// stores)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec

from dataspace.runs.results import read_results
from dataspace.store import open_store
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.ray,
    pytest.mark.sandbox,
    pytest.mark.llm,
    pytest.mark.integration,
]

TASKS = ("task_1", "task_2", "task_3")


@pytest.fixture
def ray_dir():
    d = short_ray_dir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _start(spec: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dataspace.cli", "run", str(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _held_scripts() -> dict:
    # the first request of task_1's first step is held until the test opens the gate: the
    # first invocation is surely mid-run while the second one starts
    return {
        "*": [],
        "task_1": [{"faults": [{"wait": "first-run", "times": 1}], "content": "x"}],
        "task_2": [],
        "task_3": [],
    }


@pytest.fixture(params=["file", "s3"])
def store(request, tmp_path) -> Iterator[tuple[str, dict[str, str], object]]:
    """(store URI, the environment a user sets for it, an open store to read it back)."""
    if request.param == "file":
        root = tmp_path / "store"
        yield str(root), {}, open_store(str(root))
        return
    from dataspace.testing.s3server import (
        TEST_CREDENTIALS,
        create_bucket,
        moto_s3_server,
        s3_test_options,
    )

    with moto_s3_server() as endpoint:
        create_bucket(endpoint, "bench")
        env = {
            "DATASPACE_S3_ENDPOINT": endpoint,
            "AWS_ACCESS_KEY_ID": TEST_CREDENTIALS["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": TEST_CREDENTIALS["secret_access_key"],
            "AWS_DEFAULT_REGION": TEST_CREDENTIALS["region"],
        }
        uri = "s3://bench/team-runs"
        yield uri, env, open_store(uri, **s3_test_options(endpoint))


def test_the_same_run_started_twice_runs_once(tmp_path, ray_dir, store):
    """Guards double runs: a second invocation of a live run is refused, naming the holder.

    It used to run every task again (double spend) and exit 0 beside the first.
    """
    uri, store_env, reader = store
    release = write_tiny_release(tmp_path / "release", tasks=len(TASKS))
    with ScriptedServer(_held_scripts()) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, uri, [model_agent(srv.url)])
        env = cli_env(ray_dir, **{KEY_ENV: SECRET}, **store_env)
        first = _start(spec, env)
        try:
            _wait(lambda: srv.served("task_1", 0) > 0, 240, "the first invocation mid-run")
            time.sleep(1)  # the user starts the same command again a second later
            t = time.monotonic()
            second = dataspace("run", str(spec), env=env, timeout=120)
            refused_in = time.monotonic() - t
            srv.open_gate("first-run")
            out, _ = first.communicate(timeout=300)
        finally:
            _stop(first)
    assert second.returncode == 2, second.stdout + second.stderr
    lines = [ln for ln in second.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, second.stderr
    line = lines[0]
    assert line.startswith("error: run 'r1' is already running"), line
    assert f"pid {first.pid}" in line and os.uname().nodename in line, line
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", line), line
    assert refused_in < 60, refused_in
    assert first.returncode == 0, out
    # every task's attempt ran once: one first request per task, one row each
    assert all(srv.served(t, 0) == 1 and srv.served(t, 1) == 1 for t in TASKS), srv.requests
    df = read_results(reader.get_bytes("runs/r1/results.parquet"))
    assert sorted(df["task_id"]) == list(TASKS) and (df["infra_retries"] == 0).all()
    lease = [k for k in reader.list("runs/r1/lease/")]
    assert len(lease) == 1 and json.loads(reader.get_bytes(lease[0]))["released"] is True


def test_a_lease_not_renewed_is_taken_over_after_its_stated_time(tmp_path, ray_dir):
    """Guards a stuck holder: once it stops renewing for the lease time, a new invocation runs.

    Before that time the new invocation is refused and told when the lease expires.
    """
    release = write_tiny_release(tmp_path / "release", tasks=len(TASKS))
    store = tmp_path / "store"
    with ScriptedServer(_held_scripts()) as srv:
        spec = write_spec(tmp_path / "s.yaml", release, store, [model_agent(srv.url)])
        env = cli_env(ray_dir, **{KEY_ENV: SECRET}, DATASPACE_LEASE_SECONDS="3")
        first = _start(spec, env)
        lease_dir = store / "runs/r1/lease"
        try:
            _wait(lambda: srv.served("task_1", 0) > 0, 240, "the first invocation mid-run")
            os.kill(first.pid, signal.SIGSTOP)  # it stops renewing (its pid still lives)
            refused = dataspace("run", str(spec), env=env, timeout=120)

            def expired() -> bool:
                doc = json.loads(next(lease_dir.iterdir()).read_text())
                return time.time() - doc["renewed_at"] > 3.5

            _wait(expired, 60, "the stopped holder's lease to expire")
            taken = dataspace("run", str(spec), env=env, timeout=300)
        finally:
            _stop(first)
            srv.open_gate("first-run")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "taken over 3 s after its last renewal (DATASPACE_LEASE_SECONDS)" in refused.stderr
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert "taking over the lease of host" in taken.stderr
    df = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
    assert sorted(df["task_id"]) == list(TASKS)
    assert [p.name for p in lease_dir.iterdir()] == ["000000000002.json"]
