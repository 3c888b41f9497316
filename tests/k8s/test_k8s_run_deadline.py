"""An attempt of DataSpace-Agent on the kubernetes backend whose pod reaches its deadline.

The loopback fake kills the pod's containers at ``activeDeadlineSeconds`` and reports the
phase a second later, as a kubelet does. The attempt must end as the agent's outcome
(``wall_time_exhausted``), once: an infrastructure error would be retried with a second
pod, and the model paid twice (issue 23). ``run_attempt`` is what each Ray task of
``dataspace run`` calls; going through the CLI adds only a Ray start-up.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import IMAGE_BINDS, NAMESPACE

from dataspace.llm.models import ModelSpec
from dataspace.runs.attempt import AttemptRequest, run_attempt
from dataspace.runs.spec import AgentSpec, Limits, SandboxConfig
from dataspace.sandbox.kubernetes import BASE_PATH
from dataspace.status import AttemptStatus
from dataspace.testing.fake_k8s import FakeKubernetes, chroot_runtime_available
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.llm, pytest.mark.integration]

ACTIVE_DEADLINE = 12
"""The pod's activeDeadlineSeconds here (the sandbox's own wall clock is far longer)."""
KEY_ENV = "DATASPACE_K8S_DEADLINE_TEST_KEY"


def test_a_pod_past_its_deadline_ends_the_attempt_once_as_the_agents_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards: the kubelet kills first and writes the phase later, so the broken exec read
    a Running pod and the attempt ended ``infrastructure_error`` (k8s_api) and ran again."""
    if not chroot_runtime_available():
        pytest.skip("the fake cluster runs containers in mount namespaces: needs root and unshare")
    monkeypatch.setenv(KEY_ENV, "sk-scripted-not-a-real-key")
    release = write_tiny_release(tmp_path / "release", tasks=1)
    limits = Limits(model_turns=10, wall_seconds=120, command_timeout=60, cpus=1)
    # the sandbox's clock is Limits.for_sandbox(): a grace below zero brings the pod's
    # activeDeadlineSeconds down to ACTIVE_DEADLINE
    grace = ACTIVE_DEADLINE - limits.for_sandbox().wall_seconds
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls /workspace"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 50"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 50"}}]},
    ]
    with FakeKubernetes(image_binds=IMAGE_BINDS) as fake, ScriptedServer({"*": script}) as srv:
        fake.status_delay = 1.0  # the kubelet's own pace
        options = {
            "api_host": fake.url,
            "namespace": NAMESPACE,
            "slots": "thread",
            "deadline_grace": grace,
            "workspace_cache_dir": str(tmp_path / "ws-cache"),
            "path": f"{sys.prefix}/bin:{BASE_PATH}",
        }
        agent = AgentSpec(
            name="react",
            harness="dataspace-agent",
            model=ModelSpec(id="scripted-model", base_url=srv.url, key_env=KEY_ENV),
        )
        row = run_attempt(
            AttemptRequest(
                run_id="r1",
                store_uri=str(tmp_path / "store"),
                release_root=str(release),
                agent=agent,
                task_id="task_1",
                attempt=1,
                key="k1",
                limits=limits,
                sandbox=SandboxConfig(backend="kubernetes", options=options),
                submitted_at=time.time(),
            )
        )
        # the kill came from the pod's deadline, not from the agent's own clock
        reasons = [(e["type"], e["reason"]) for e in fake.events(NAMESPACE)]
        assert fake.created_total == 1 and fake.pod_names() == []
    assert row["status"] == "wall_time_exhausted", row
    assert AttemptStatus(row["status"]).is_agent_outcome  # final: never run again
    assert ("Warning", "DeadlineExceeded") in reasons
