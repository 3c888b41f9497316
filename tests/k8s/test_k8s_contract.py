"""The shared sandbox contract run against the kubernetes backend.

On the loopback fake cluster (real kubernetes client, real exec websocket, real processes
behind it) and, when ``KUBECONFIG`` or an in-cluster configuration is present, against a
real cluster (see k8s/README.md for kind). The real-cluster run reads
``DATASPACE_K8S_NAMESPACE``, ``DATASPACE_K8S_IMAGE`` and ``DATASPACE_K8S_READY_TIMEOUT``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from contract import SandboxContract
from k8s_support import IMAGE_BINDS, make_backend

from dataspace.sandbox.kubernetes import DEFAULT_IMAGE, KubernetesBackend
from dataspace.testing.fake_k8s import FakeKubernetes, chroot_runtime_available


@pytest.fixture(scope="module")
def module_fake() -> Iterator[FakeKubernetes]:
    if not chroot_runtime_available():
        pytest.skip("the fake cluster runs containers in mount namespaces: needs root and unshare")
    with FakeKubernetes(image_binds=IMAGE_BINDS, runtime="chroot") as server:
        yield server
        assert server.pod_names() == [], "a sandbox pod was left behind"


class TestKubernetesContractOnFakeCluster(SandboxContract):
    @pytest.fixture
    def backend(self, module_fake: FakeKubernetes, tmp_path: Path) -> KubernetesBackend:
        # Workspaces come from a shared volume here (the quickest start); the streamed
        # staging of the default mode is exercised by test_k8s_pod_controller.py.
        cache = tmp_path / "shared-cache"
        module_fake.claims["workspaces"] = cache
        return make_backend(
            module_fake,
            tmp_path,
            workspace_cache_dir=str(cache),
            workspace_volume={"persistentVolumeClaim": {"claimName": "workspaces"}},
        )


def _real_cluster_reason() -> str | None:
    if os.environ.get("KUBERNETES_SERVICE_HOST") or os.environ.get("KUBECONFIG"):
        return None
    return "no cluster configured: set KUBECONFIG (or run in a pod) to run the contract on one"


if _real_cluster_reason() is None:

    @pytest.mark.k8s
    class TestKubernetesContractOnRealCluster(SandboxContract):
        """Needs the manifests of k8s/ applied and the runtime image pullable (k8s/README.md)."""

        @pytest.fixture
        def backend(self) -> Iterator[KubernetesBackend]:
            backend = KubernetesBackend(
                namespace=os.environ.get("DATASPACE_K8S_NAMESPACE", "dataspace-sandboxes"),
                image=os.environ.get("DATASPACE_K8S_IMAGE", DEFAULT_IMAGE),
                ready_timeout=float(os.environ.get("DATASPACE_K8S_READY_TIMEOUT", "300")),
                slots="thread",
            )
            yield backend
            backend.sweep({"suite": "contract"})

else:

    @pytest.mark.k8s
    @pytest.mark.skip(reason=str(_real_cluster_reason()))
    def test_the_contract_on_a_real_cluster() -> None:
        """Stands for the contract suite on a real cluster, which needs KUBECONFIG."""
