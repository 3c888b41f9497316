"""One attempt end to end on the cluster path, without Ray: ``run_attempt`` with the
kubernetes backend (by name, through the registry) on the loopback fake cluster, its files
written to an ``s3://`` store on a moto server."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import IMAGE_BINDS, NAMESPACE

from dataspace.runs.attempt import AttemptRequest, run_attempt
from dataspace.runs.layout import RunLayout
from dataspace.runs.spec import AgentSpec, Limits, SandboxConfig
from dataspace.sandbox.kubernetes import BASE_PATH
from dataspace.sandbox.workbench import manifest_identity
from dataspace.testing.fake_k8s import RUNTIME_MANIFEST, FakeKubernetes, chroot_runtime_available
from dataspace.testing.releases import write_tiny_release

pytestmark = [pytest.mark.integration, pytest.mark.s3]


def test_an_attempt_runs_in_a_pod_and_streams_its_files_to_s3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not chroot_runtime_available():
        pytest.skip("the fake cluster runs containers in mount namespaces: needs root and unshare")
    from dataspace.store import open_store
    from dataspace.testing.s3server import TEST_CREDENTIALS, create_bucket, moto_s3_server

    release = write_tiny_release(tmp_path / "release", tasks=1)
    with moto_s3_server() as endpoint, FakeKubernetes(image_binds=IMAGE_BINDS) as fake:
        create_bucket(endpoint, "bench")
        monkeypatch.setenv("DATASPACE_S3_ENDPOINT", endpoint)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_CREDENTIALS["access_key_id"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_CREDENTIALS["secret_access_key"])
        monkeypatch.setenv("AWS_DEFAULT_REGION", TEST_CREDENTIALS["region"])
        options = {
            "api_host": fake.url,
            "namespace": NAMESPACE,
            "slots": "thread",
            "workspace_cache_dir": str(tmp_path / "cache"),
            "path": f"{sys.prefix}/bin:{BASE_PATH}",
        }
        req = AttemptRequest(
            run_id="k8s-run",
            store_uri="s3://bench/store",
            release_root=str(release),
            agent=AgentSpec(name="gold", harness="gold"),
            task_id="task_1",
            attempt=1,
            key="k1",
            limits=Limits(wall_seconds=120, command_timeout=30, cpus=1),
            sandbox=SandboxConfig(backend="kubernetes", options=options),
            submitted_at=time.time(),
        )
        row = run_attempt(req)
        assert (row["status"], row["passed"]) == ("submitted", True)
        assert row["sandbox_enforcement"] == "kubernetes"
        assert fake.calls["create pods"] == 1 and fake.pod_names() == []
        store = open_store("s3://bench/store")
        adir = RunLayout(run_id="k8s-run").attempt("gold", "task_1", 1)
        keys = set(store.list(adir + "/"))
        assert {
            f"{adir}/events.jsonl",
            f"{adir}/run.json",
            f"{adir}/result.json",
            f"{adir}/output/prediction.csv",
        } <= keys
        run = json.loads(store.get_bytes(f"{adir}/run.json"))
        assert run["sandbox"]["pod"].startswith("ds-k8s-run-task-1-a1-")
        assert run["sandbox"]["labels"]["run"] == "k8s-run"
        # the runtime manifest read back from the pod's image, as the local backend records
        assert run["sandbox"]["runtime"] == manifest_identity(RUNTIME_MANIFEST)
