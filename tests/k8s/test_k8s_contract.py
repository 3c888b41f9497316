"""The shared sandbox contract run against the kubernetes backend on a real cluster.

When ``KUBECONFIG`` or an in-cluster configuration is present (see k8s/README.md for kind);
on the loopback fake cluster it runs with every other backend in
``tests/sandbox/test_sandbox_contract.py``. The real-cluster run reads
``DATASPACE_K8S_NAMESPACE``, ``DATASPACE_K8S_IMAGE`` and ``DATASPACE_K8S_READY_TIMEOUT``;
both runs size their pods by ``DATASPACE_K8S_TEST_CPU`` and ``DATASPACE_K8S_TEST_MEMORY``
(default half a CPU and 512Mi, see ``k8s_support.contract_resources``), so the suite fits a
small node (the fake schedules by requests too).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from contract import SandboxContract
from k8s_support import contract_resources

from dataspace.sandbox import Limits, SandboxSpec
from dataspace.sandbox.kubernetes import DEFAULT_IMAGE, KubernetesBackend


class _SizedContract(SandboxContract):
    """The contract with pods of the suite's own size (not the benchmark's 4 CPU / 16 GiB)."""

    def spec(self, workspace: Path, limits: Limits, env: dict[str, str]) -> SandboxSpec:
        sized = dataclasses.replace(limits, **contract_resources())
        return super().spec(workspace, sized, env)


def test_the_suites_pods_are_sized_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: the suite's pods asked for the fixed 4 CPU / 16 GiB of the benchmark's
    defaults, which no small node schedules (``FailedScheduling: Insufficient cpu``)."""
    from dataspace.errors import ConfigError

    monkeypatch.delenv("DATASPACE_K8S_TEST_CPU", raising=False)
    monkeypatch.delenv("DATASPACE_K8S_TEST_MEMORY", raising=False)
    assert contract_resources() == {"cpus": 0.5, "memory_bytes": 512 * 1024**2}
    monkeypatch.setenv("DATASPACE_K8S_TEST_CPU", "250m")
    monkeypatch.setenv("DATASPACE_K8S_TEST_MEMORY", "1Gi")
    assert contract_resources() == {"cpus": 0.25, "memory_bytes": 1024**3}
    monkeypatch.setenv("DATASPACE_K8S_TEST_CPU", "lots")
    with pytest.raises(ConfigError, match=r"DATASPACE_K8S_TEST_CPU='lots': expected"):
        contract_resources()


def _real_cluster_reason() -> str | None:
    if os.environ.get("KUBERNETES_SERVICE_HOST") or os.environ.get("KUBECONFIG"):
        return None
    return "no cluster configured: set KUBECONFIG (or run in a pod) to run the contract on one"


if _real_cluster_reason() is None:

    @pytest.mark.k8s
    class TestKubernetesContractOnRealCluster(_SizedContract):
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
