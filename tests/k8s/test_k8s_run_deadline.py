"""``dataspace run`` on the kubernetes backend when a pod reaches activeDeadlineSeconds.

The loopback fake kills the pod's containers at the deadline and reports the phase a
second later, as a kubelet does. The attempt must end as the agent's outcome
(``wall_time_exhausted``), once: an infrastructure error would be retried with a second
pod, and the model paid twice (issue 23).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runs"))
from cli_helpers import KEY_ENV, SECRET, cli_env, dataspace, model_agent, short_ray_dir, write_spec
from k8s_support import IMAGE_BINDS, NAMESPACE

from dataspace.runs.results import read_results
from dataspace.sandbox.kubernetes import BASE_PATH
from dataspace.store import open_store
from dataspace.testing.fake_k8s import FakeKubernetes, chroot_runtime_available
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.timeout(600), pytest.mark.llm, pytest.mark.integration]

ACTIVE_DEADLINE = 15
"""The pod's activeDeadlineSeconds in this test (the sandbox's wall clock is longer)."""


def test_a_pod_past_its_deadline_ends_the_attempt_once_as_the_agents_outcome(
    tmp_path: Path,
) -> None:
    """Guards: the kubelet kills first and writes the phase later, so the broken exec read
    a Running pod and the attempt ended ``infrastructure_error`` (k8s_api) and ran again."""
    if not chroot_runtime_available():
        pytest.skip("the fake cluster runs containers in mount namespaces: needs root and unshare")
    release = write_tiny_release(tmp_path / "release", tasks=1)
    store = tmp_path / "store"
    ray_dir = short_ray_dir()
    wall = 120
    # the sandbox's own clock is 2 * wall + 60 (Limits.for_sandbox): a grace below zero
    # brings the pod's activeDeadlineSeconds down to ACTIVE_DEADLINE
    grace = ACTIVE_DEADLINE - (2 * wall + 60)
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls /workspace"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 50"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 50"}}]},
    ]
    try:
        with FakeKubernetes(image_binds=IMAGE_BINDS) as fake, ScriptedServer({"*": script}) as srv:
            spec = write_spec(
                tmp_path / "spec.yaml",
                release,
                store,
                [model_agent(srv.url)],
                limits={"model_turns": 10, "wall_seconds": wall, "command_timeout": 60},
                sandbox={
                    "backend": "kubernetes",
                    "cpus": 1,
                    "memory": "1GiB",
                    "options": {
                        "api_host": fake.url,
                        "namespace": NAMESPACE,
                        "slots": "thread",
                        "deadline_grace": grace,
                        "workspace_cache_dir": str(tmp_path / "ws-cache"),
                        "path": f"{sys.prefix}/bin:{BASE_PATH}",
                    },
                },
            )
            started = time.monotonic()
            proc = dataspace(
                "run", str(spec), env=cli_env(ray_dir, **{KEY_ENV: SECRET}), timeout=500
            )
            elapsed = time.monotonic() - started
            created, left = fake.created_total, fake.pod_names()
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "infrastructure failure" not in out
    rows = read_results(open_store(str(store)).get_bytes("runs/r1/results.parquet"))
    assert list(rows["status"]) == ["wall_time_exhausted"], rows.to_dict("records")
    assert created == 1, f"{created} pods: the attempt was retried"
    assert left == []
    assert elapsed < 2 * wall
