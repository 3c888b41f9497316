"""The sandbox contract run against every registered backend this machine can run.

``local`` with cgroup limits and with rlimits; ``docker`` on Debian's Docker daemon;
``kubernetes`` on the loopback fake cluster
(real kubernetes client, real exec websocket, real processes behind it; the real-cluster
run is in ``tests/k8s/test_k8s_contract.py``). A backend this machine cannot run is
skipped with the reason; a registered backend with no provider here fails, so a new
backend cannot skip the suite.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from contract import SandboxContract

from dataspace.sandbox import Limits, SandboxBackend, SandboxSpec, backend_names

pytestmark = pytest.mark.sandbox

K8S_TESTS = Path(__file__).resolve().parents[1] / "k8s"


@pytest.fixture(scope="module")
def k8s_fake() -> Iterator[object]:
    """The loopback fake cluster, once for the module (skipped where it cannot run)."""
    pytest.importorskip(
        "kubernetes",
        reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
    )
    if str(K8S_TESTS) not in sys.path:
        sys.path.insert(0, str(K8S_TESTS))
    from k8s_support import IMAGE_BINDS

    from dataspace.testing.fake_k8s import FakeKubernetes, chroot_runtime_available

    if not chroot_runtime_available():
        pytest.skip("the fake cluster runs containers in mount namespaces: needs root and unshare")
    with FakeKubernetes(image_binds=IMAGE_BINDS, runtime="chroot") as server:
        yield server
        assert server.pod_names() == [], "a sandbox pod was left behind"


@dataclasses.dataclass(frozen=True)
class Target:
    """A backend under test and the resources its sandboxes get in the suite."""

    backend: SandboxBackend
    resources: dict[str, float] = dataclasses.field(default_factory=dict)


def _local(request: pytest.FixtureRequest, tmp_path: Path, variant: str) -> Target:
    from dataspace.errors import SandboxError
    from dataspace.sandbox.local import LocalBackend

    state_dir = request.getfixturevalue("sandbox_state_dir")
    try:
        backend = LocalBackend(state_dir=state_dir, enforcement=variant)  # type: ignore[arg-type]
    except SandboxError as exc:
        pytest.skip(f"local sandbox with {variant} enforcement unavailable here: {exc}")
    return Target(backend=backend)


def _kubernetes(request: pytest.FixtureRequest, tmp_path: Path, variant: str) -> Target:
    fake = request.getfixturevalue("k8s_fake")
    from k8s_support import contract_resources, make_backend

    # Workspaces come from a shared volume here (the quickest start); the streamed
    # staging of the default mode is exercised by tests/k8s/test_k8s_pod_controller.py.
    cache = tmp_path / "shared-cache"
    fake.claims["workspaces"] = cache  # type: ignore[attr-defined]
    backend = make_backend(
        fake,
        tmp_path,
        workspace_cache_dir=str(cache),
        workspace_volume={"persistentVolumeClaim": {"claimName": "workspaces"}},
    )
    # pods of the suite's own size, not the benchmark's 4 CPU / 16 GiB
    return Target(backend=backend, resources=contract_resources())


def _docker(request: pytest.FixtureRequest, tmp_path: Path, variant: str) -> Target:
    from test_sandbox_docker import open_docker_backend

    return Target(backend=open_docker_backend())


Provider = Callable[[pytest.FixtureRequest, Path, str], Target]
PROVIDERS: dict[str, tuple[Provider, tuple[str, ...]]] = {
    "local": (_local, ("cgroup", "rlimit")),
    "kubernetes": (_kubernetes, ("fake-cluster",)),
    "docker": (_docker, ("daemon",)),
}
"""How the suite gets each backend, and its variants (a backend's test setup)."""


def _params() -> list[object]:
    params: list[object] = []
    for name in backend_names():
        variants = PROVIDERS[name][1] if name in PROVIDERS else ("unprovided",)
        params += [pytest.param((name, v), id=f"{name}-{v}") for v in variants]
    return params


class TestSandboxContract(SandboxContract):
    resources: dict[str, float]

    @pytest.fixture(params=_params())
    def backend(self, request: pytest.FixtureRequest, tmp_path: Path) -> SandboxBackend:
        name, variant = request.param
        if name not in PROVIDERS:
            pytest.fail(
                f"sandbox backend {name!r} is registered but the contract suite has no "
                "provider for it: add one to PROVIDERS in tests/sandbox/test_sandbox_contract.py"
            )
        target = PROVIDERS[name][0](request, tmp_path, variant)
        self.resources = dict(target.resources)
        return target.backend

    def spec(self, workspace: Path, limits: Limits, env: dict[str, str]) -> SandboxSpec:
        sized = dataclasses.replace(limits, **self.resources)
        return super().spec(workspace, sized, env)
