"""``dataspace doctor SPEC`` on a Kubernetes spec does what a run will do, without running it.

Each case drives the real command against the loopback fake enforcing the manifests of
``k8s/base`` (RBAC, Pod Security "restricted", the admission policy, the quota) and checks
its exit code and screen lines: one line per check, exit 2 on a failure. Before, doctor
only listed pods, so a missing namespace, Pod Security, the admission policy, the quota, a
bad image and a pod too big for every node all passed it and failed the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from test_k8s_api_server import SANDBOX_NS, base_docs, with_quota

from dataspace.sandbox.kubernetes import BASE_PATH
from dataspace.testing.fake_k8s import Behaviour, FakeKubernetes
from dataspace.testing.fake_k8s.policy import NODE, ApiPolicy, node
from dataspace.testing.releases import write_tiny_release

IMAGE = "registry.example/dataspace/runtime:1.0.0"


def doctor(
    fake: FakeKubernetes, tmp_path: Path, *, cpus: float = 1, **options: Any
) -> tuple[int, list[str]]:
    """``dataspace doctor SPEC --no-model-calls``: exit code and the sandbox lines."""
    release = write_tiny_release(tmp_path / "release", tasks=1)
    spec = {
        "run_id": "pf",
        "release": str(release),
        "store": str(tmp_path / "store"),
        "agents": [{"name": "gold", "harness": "gold"}],
        "sandbox": {
            "backend": "kubernetes",
            "image": IMAGE,
            "cpus": cpus,
            "memory": "1GiB",
            "options": {
                "api_host": fake.url,
                "namespace": SANDBOX_NS,
                "slots": "thread",
                "api_backoff_base": 0.01,
                "workspace_cache_dir": str(tmp_path / "cache"),
                "path": f"{sys.prefix}/bin:{BASE_PATH}",
                "preflight_pull_timeout": 20,
                **options,
            },
        },
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-m", "dataspace.cli", "doctor", str(path), "--no-model-calls"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    lines = [ln for ln in proc.stdout.splitlines() if " sandbox" in ln[:16]]
    return proc.returncode, lines


def line(lines: list[str], key: str) -> str:
    return next((ln for ln in lines if ln.split()[1] == f"{key}:"), f"<no {key} line>")


@pytest.fixture
def cluster(fake: FakeKubernetes) -> FakeKubernetes:
    fake.policy = ApiPolicy.from_manifests(base_docs())
    return fake


def test_a_good_spec_passes_every_cluster_check_and_leaves_no_pod(
    cluster: FakeKubernetes, tmp_path: Path
) -> None:
    code, lines = doctor(cluster, tmp_path)
    assert code == 0, lines
    assert line(lines, "sandbox.namespace") == (
        f"ok   sandbox.namespace: {SANDBOX_NS} exists (Pod Security: restricted)"
    )
    assert line(lines, "sandbox.pod").startswith("ok   sandbox.pod: the attempt's pod is admitted")
    assert line(lines, "sandbox.resources").startswith(
        "ok   sandbox.resources: requests cpu=1, memory=1Gi"
    )
    assert line(lines, "sandbox.image").startswith(
        f"ok   sandbox.image: {IMAGE} pulled by a one-off pod on node {NODE}"
    )
    assert cluster.created_total == 1 and cluster.pod_names() == []  # the one-off pod, deleted


def test_an_image_a_node_holds_needs_no_pod(cluster: FakeKubernetes, tmp_path: Path) -> None:
    cluster.policy.nodes = [node(NODE, images=[IMAGE])]
    code, lines = doctor(cluster, tmp_path)
    assert code == 0, lines
    assert line(lines, "sandbox.image") == (
        f"ok   sandbox.image: {IMAGE} is on every schedulable node ({NODE})"
    )
    assert cluster.created_total == 0


def test_nodes_without_the_image_are_named_with_the_pre_pull_fix(
    cluster: FakeKubernetes, tmp_path: Path
) -> None:
    """Guards the cold-pull check: a node lacks the image (cordoned ones do not count)."""
    cluster.policy.nodes = [
        node(NODE, images=[IMAGE]),
        node("node-2", images=[IMAGE]),
        node("node-3"),
        node("cordoned"),  # unschedulable: no attempt goes there
    ]
    cluster.policy.nodes[-1]["spec"]["unschedulable"] = True
    code, lines = doctor(cluster, tmp_path)
    assert code == 0, lines  # a warning: the run waits for the pre-pull, then works
    assert line(lines, "sandbox.image") == (
        f"warn sandbox.image: {IMAGE} is on 2 of 3 schedulable nodes, not on node-3: a run "
        "waits up to 600 s (image_wait) for them before its first attempt; pre-pull it on "
        "every node (kubectl apply -f k8s/base/prepull-daemonset.yaml, then kubectl -n "
        "dataspace rollout status daemonset/runtime-prepull)"
    ), lines
    assert cluster.created_total == 0


def test_a_namespace_that_does_not_exist_fails(cluster: FakeKubernetes, tmp_path: Path) -> None:
    """Guards doctor against the empty list a missing namespace answers (it passed before)."""
    cluster.policy = ApiPolicy.from_manifests(base_docs(), user=None)  # an admin kubeconfig
    code, lines = doctor(cluster, tmp_path, namespace="no-such-namespace")
    assert code == 2
    assert line(lines, "sandbox.namespace") == (
        "FAIL sandbox.namespace: no-such-namespace does not exist; apply the manifests first "
        "(kubectl apply -f k8s/base/namespaces.yaml, see k8s/README.md) or set "
        "sandbox.options.namespace"
    )


def test_pod_security_refuses_a_hostpath_workspace(cluster: FakeKubernetes, tmp_path: Path) -> None:
    hostpath = {"hostPath": {"path": "/var/lib/dataspace/cache", "type": "Directory"}}
    code, lines = doctor(cluster, tmp_path, workspace_volume=hostpath, node_name=NODE)
    assert code == 2
    pod = line(lines, "sandbox.pod")
    assert pod.startswith(
        "FAIL sandbox.pod: the attempt's pod is refused by Pod Security (a bad sandbox spec): "
        'HTTP 403 pods "ds-pf-preflight-'
    )
    assert 'violates PodSecurity "restricted:latest": hostPath volumes (volume "workspace")' in pod
    assert "rbac.yaml" not in pod


def test_the_admission_policy_refuses_where_pod_security_does_not(
    cluster: FakeKubernetes, tmp_path: Path
) -> None:
    assert cluster.policy.namespaces is not None
    cluster.policy.namespaces[SANDBOX_NS] = {}  # a cluster that enforces no Pod Security
    hostpath = {"hostPath": {"path": "/srv/workspaces", "type": "Directory"}}
    code, lines = doctor(cluster, tmp_path, workspace_volume=hostpath, node_name=NODE)
    assert code == 2
    pod = line(lines, "sandbox.pod")
    assert "refused by an admission policy (a bad sandbox spec): HTTP 422" in pod
    assert pod.endswith(
        "ValidatingAdmissionPolicy 'dataspace-sandbox-pods' with binding "
        "'dataspace-sandbox-pods' denied request: the only hostPath a sandbox may mount is "
        "the workspace cache (an admission policy refused the pod: a bad sandbox spec; see "
        "k8s/base/sandbox-admission-policy.yaml)"
    )


def test_a_pod_the_quota_can_never_hold_fails(cluster: FakeKubernetes, tmp_path: Path) -> None:
    cluster.policy = ApiPolicy.from_manifests(with_quota(base_docs(), **{"limits.cpu": "2"}))
    code, lines = doctor(cluster, tmp_path / "big", cpus=4)
    assert code == 2
    pod = line(lines, "sandbox.pod")
    assert "FAIL sandbox.pod: the attempt's pod alone exceeds the namespace's quota" in pod
    assert "(limits.cpu=4 > 2)" in pod and "exceeded quota: sandboxes" in pod
    cluster.policy = ApiPolicy.from_manifests(with_quota(base_docs(), pods="0"))
    code, lines = doctor(cluster, tmp_path / "none")
    assert code == 2 and "(pods=1 > 0)" in line(lines, "sandbox.pod")


def test_a_bad_image_fails(cluster: FakeKubernetes, tmp_path: Path) -> None:
    cluster.behaviour = Behaviour(outcome="image_pull")
    code, lines = doctor(cluster, tmp_path)
    assert code == 2
    image = line(lines, "sandbox.image")
    assert image.startswith(f"FAIL sandbox.image: {IMAGE} cannot be pulled (")
    assert "images/build.sh" in image and "Failed to pull image" in image
    assert cluster.pod_names() == []


def test_requests_no_node_can_hold_fail(cluster: FakeKubernetes, tmp_path: Path) -> None:
    cluster.policy.nodes = [node(NODE, cpu="2", memory="8Gi", images=[IMAGE])]
    code, lines = doctor(cluster, tmp_path, cpus=4)
    assert code == 2
    assert line(lines, "sandbox.resources").startswith(
        "FAIL sandbox.resources: requests cpu=4, memory=1Gi"
    )
    assert f"fit no schedulable node (largest: {NODE} with cpu=2, memory=8Gi" in line(
        lines, "sandbox.resources"
    )


def test_without_the_node_reader_role_node_checks_are_warnings(
    fake: FakeKubernetes, tmp_path: Path
) -> None:
    docs = [d for d in base_docs() if d["kind"] not in ("ClusterRole", "ClusterRoleBinding")]
    fake.policy = ApiPolicy.from_manifests(docs)
    code, lines = doctor(fake, tmp_path)
    assert code == 0, lines
    resources = line(lines, "sandbox.resources")
    assert resources.startswith("warn sandbox.resources: requests cpu=1")
    assert 'cannot list resource "nodes"' in resources and "dataspace-node-reader" in resources
    assert line(lines, "sandbox.image").startswith(f"ok   sandbox.image: {IMAGE} pulled")
