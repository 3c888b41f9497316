"""What a real API server refuses, reproduced by the fake, and how the backend answers it.

The fake here enforces the manifests of ``k8s/base`` as a cluster that applied them does:
RBAC for the controller's service account, the sandbox namespace's Pod Security level, the
project's ValidatingAdmissionPolicy and the ResourceQuota. Each refusal carries the real
API server's body; the backend names its cause (quota waits for room, Pod Security and
admission are bad specs, only RBAC gets the RBAC hint).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import make_backend

from dataspace.sandbox.base import Limits, SandboxSpec
from dataspace.sandbox.kubernetes import PodFailedError
from dataspace.testing.fake_k8s import FakeKubernetes
from dataspace.testing.fake_k8s.policy import CONTROLLER_USER, ApiPolicy

K8S = Path(__file__).resolve().parents[2] / "k8s"
SANDBOX_NS = "dataspace-sandboxes"
LABELS = {"run": "r1", "agent": "gold", "task": "task_1", "attempt": "1"}


def base_docs() -> list[dict[str, Any]]:
    """Every object of ``k8s/base`` (what ``kubectl apply -k k8s/base`` creates)."""
    docs: list[dict[str, Any]] = []
    for path in sorted((K8S / "base").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def with_quota(docs: list[dict[str, Any]], **hard: str) -> list[dict[str, Any]]:
    out = []
    for d in docs:
        if d["kind"] == "ResourceQuota":
            d = {**d, "spec": {"hard": {**d["spec"]["hard"], **hard}}}
        out.append(d)
    return out


def spec(workspace: Path, **labels: str) -> SandboxSpec:
    return SandboxSpec(
        workspace=workspace,
        labels={**LABELS, **labels},
        limits=Limits(wall_seconds=120, command_timeout=30, cpus=1),
    )


def k8s_client(fake: FakeKubernetes) -> Any:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = fake.url
    return client.CoreV1Api(client.ApiClient(cfg))


def test_refusals_carry_the_real_api_servers_bodies(fake: FakeKubernetes) -> None:
    """Guards the fake's RBAC, namespace, Pod Security, admission and quota answers."""
    import json

    from kubernetes.client.rest import ApiException

    fake.policy = ApiPolicy.from_manifests(with_quota(base_docs(), pods="0"))
    api = k8s_client(fake)

    def refused(call: Any, *args: Any, **kwargs: Any) -> tuple[int, str, str]:
        with pytest.raises(ApiException) as caught:
            call(*args, **kwargs)
        body = json.loads(caught.value.body)
        return caught.value.status, body["reason"], body["message"]

    # RBAC: the controller's Role is in the sandbox namespace only
    assert refused(api.list_namespaced_pod, "default") == (
        403,
        "Forbidden",
        f'pods is forbidden: User "{CONTROLLER_USER}" cannot list resource "pods" in API '
        'group "" in the namespace "default"',
    )
    assert refused(api.list_namespaced_secret, SANDBOX_NS)[2].startswith(
        f'secrets is forbidden: User "{CONTROLLER_USER}" cannot list resource "secrets"'
    )
    # a namespace that does not exist lists as empty, and a create there is a 404
    open_policy = ApiPolicy.from_manifests(base_docs(), user=None)
    fake.policy = open_policy
    assert api.list_namespaced_pod("no-such-namespace").items == []
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert refused(api.create_namespaced_pod, "no-such-namespace", pod) == (
        404,
        "NotFound",
        'namespaces "no-such-namespace" not found',
    )
    # Pod Security "restricted" on the sandbox namespace
    code, reason, message = refused(api.create_namespaced_pod, SANDBOX_NS, pod)
    assert (code, reason) == (403, "Forbidden")
    assert message == (
        'pods "p" is forbidden: violates PodSecurity "restricted:latest": '
        'allowPrivilegeEscalation != false (container "c" must set '
        "securityContext.allowPrivilegeEscalation=false), unrestricted capabilities "
        '(container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != '
        'true (pod or container "c" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" or "Localhost")'
    )
    # the project's admission policy, where Pod Security lets the pod through
    open_policy.namespaces[SANDBOX_NS] = {}  # type: ignore[index]
    code, reason, message = refused(api.create_namespaced_pod, SANDBOX_NS, pod)
    assert (code, reason) == (422, "Invalid")
    assert message == (
        "pods \"p\" is forbidden: ValidatingAdmissionPolicy 'dataspace-sandbox-pods' with "
        "binding 'dataspace-sandbox-pods' denied request: sandbox pods must set "
        "automountServiceAccountToken: false"
    )
    # quota: the namespace's kube-root-ca.crt counts against configmaps
    fake.policy = ApiPolicy.from_manifests(with_quota(base_docs(), configmaps="1"), user=None)
    cm = {"metadata": {"name": "extra"}}
    assert refused(api.create_namespaced_config_map, SANDBOX_NS, cm) == (
        403,
        "Forbidden",
        'configmaps "extra" is forbidden: exceeded quota: sandboxes, requested: '
        "configmaps=1, used: configmaps=1, limited: configmaps=1",
    )


def test_the_quota_leaves_room_for_the_configmaps_a_namespace_gets(fake: FakeKubernetes) -> None:
    """Guards k8s/base's quota against a fresh namespace: kube-root-ca.crt is already
    there, and distributions add their own (a second ConfigMap must fit)."""
    fake.policy = ApiPolicy.from_manifests(base_docs(), user=None)
    api = k8s_client(fake)
    api.create_namespaced_config_map(SANDBOX_NS, {"metadata": {"name": "openshift-service-ca.crt"}})
    names = {c.metadata.name for c in api.list_namespaced_config_map(SANDBOX_NS).items}
    assert names == {"kube-root-ca.crt", "openshift-service-ca.crt"}


def test_a_full_quota_is_capacity_the_pod_waits_for(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards quota refusals: with concurrency 2 against ``pods: 1`` the second sandbox
    waits for the first to end (no failure, no RBAC hint), then starts."""
    fake.policy = ApiPolicy.from_manifests(with_quota(base_docs(), pods="1"))
    backend = make_backend(fake, tmp_path, namespace=SANDBOX_NS)
    first = backend.create(spec(workspace, attempt="1"))
    made: dict[str, Any] = {}

    def second() -> None:
        try:
            made["sandbox"] = backend.create(spec(workspace, attempt="2"))
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            made["error"] = exc

    worker = threading.Thread(target=second)
    worker.start()
    end = time.monotonic() + 20
    while fake.calls["create pods"] < 3 and time.monotonic() < end:
        time.sleep(0.02)  # until the second creation was refused twice
    assert fake.calls["create pods"] >= 3 and "sandbox" not in made
    assert fake.pod_names(SANDBOX_NS) == [first.name]
    first.close()
    worker.join(timeout=30)
    assert "error" not in made, made.get("error")
    sb = made["sandbox"]
    assert sb.exec("echo ok").stdout == "ok\n"
    assert sb.info()["timings"]["quota_wait"] > 0  # type: ignore[index]
    sb.close()


def test_a_pod_that_alone_exceeds_the_quota_fails_at_once_named_as_quota(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.policy = ApiPolicy.from_manifests(with_quota(base_docs(), **{"limits.cpu": "500m"}))
    backend = make_backend(fake, tmp_path, namespace=SANDBOX_NS)
    with pytest.raises(PodFailedError) as caught:
        backend.create(spec(workspace))
    assert caught.value.code == "quota"
    text = str(caught.value)
    assert "limits.cpu=1 > 500m" in text and "resourcequota.yaml" in text
    assert "RBAC" not in text
    assert fake.calls["create pods"] == 1


def test_pod_security_and_rbac_refusals_are_named_for_what_they_are(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards the RBAC hint: only an RBAC 403 gets it; Pod Security is a bad spec."""
    fake.policy = ApiPolicy.from_manifests(base_docs())
    hostpath = {"hostPath": {"path": "/var/lib/dataspace/cache", "type": "Directory"}}
    backend = make_backend(
        fake,
        tmp_path,
        namespace=SANDBOX_NS,
        workspace_volume=hostpath,
        node_name="fake-node-1",
    )
    with pytest.raises(PodFailedError) as caught:
        backend.create(spec(workspace))
    assert caught.value.code == "pod_security"
    text = str(caught.value)
    assert 'violates PodSecurity "restricted:latest": hostPath volumes (volume "workspace")' in text
    assert "bad sandbox spec" in text and "rbac.yaml" not in text
    elsewhere = make_backend(fake, tmp_path, namespace="default")
    with pytest.raises(PodFailedError) as caught:
        elsewhere.create(spec(workspace))
    assert caught.value.code == "k8s_api"
    assert 'cannot create resource "pods" in API group "" in the namespace "default"' in str(
        caught.value
    )
    assert "check the controller's RBAC: k8s/base/rbac.yaml" in str(caught.value)


def test_an_api_outage_mid_attempt_is_ridden_out_within_the_retry_window(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards the retry window: an API server restart (refused for 1.5 s, then 503 while
    it drains for 1 s) no longer fails the attempt after a few quick tries."""
    backend = make_backend(fake, tmp_path, api_retry_window=30.0)
    sandbox = backend.create(spec(workspace))
    assert sandbox.exec("echo before").stdout == "before\n"
    over = fake.outage(refused=1.5, unavailable=1.0)
    t0 = time.monotonic()
    result = sandbox.exec("echo during")
    assert over.is_set() and time.monotonic() - t0 >= 2.0
    assert (result.exit_code, result.stdout) == (0, "during\n")
    sandbox.close()
    assert fake.pod_names() == []


def test_without_a_window_the_same_outage_fails_the_call(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """The outage is real: with ``api_retries`` alone (the old behaviour) it fails."""
    backend = make_backend(fake, tmp_path, api_retries=2)
    sandbox = backend.create(spec(workspace))
    over = fake.outage(refused=1.5, unavailable=0.5)
    with pytest.raises(PodFailedError):
        sandbox.exec("echo during")
    assert over.wait(10)
    sandbox.close()
