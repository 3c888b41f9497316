"""The smoke suite: the real path against whatever cluster ``DATASPACE_K8S_CONTEXT`` names.

Run it with ``scripts/k8s_smoke.py`` (see k8s/README.md, "Smoke test on a real cluster").
Without a context it is skipped with the reason; ``DATASPACE_K8S_SMOKE_FAKE=1`` runs the
same code paths against the loopback fake enforcing ``k8s/base`` (RBAC, Pod Security,
the admission policy, the quota), where what only a kubelet does (a deadline kill, an
eviction for the output volume, a failed pull) is scripted.

The cluster needs the manifests of ``k8s/base`` applied and the runtime image
(``DATASPACE_K8S_IMAGE``) pullable; the sandbox namespace is ``DATASPACE_K8S_NAMESPACE``
(default ``dataspace-sandboxes``). Cases: ``dataspace doctor``; gold and DataSpace-Agent
attempts (against the scripted model server, one task answered wrong on purpose) through
``dataspace run``; a command past the pod's deadline; an eviction for the output volume;
a pod bigger than the quota; a bad image; isolation probes from inside a pod. Nothing is
left behind: every pod is deleted and the suite sweeps its run labels at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import IMAGE_BINDS

from dataspace.sandbox.base import Limits, SandboxSpec
from dataspace.sandbox.kubernetes import (
    BASE_PATH,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    KubernetesBackend,
    PodFailedError,
)
from dataspace.testing.fake_k8s import Behaviour, FakeKubernetes, chroot_runtime_available
from dataspace.testing.fake_k8s.policy import ApiPolicy
from dataspace.testing.releases import write_tiny_release
from dataspace.testing.scripted_server import ScriptedServer

pytestmark = [pytest.mark.k8s, pytest.mark.integration, pytest.mark.timeout(1800)]

K8S = Path(__file__).resolve().parents[2] / "k8s"
RUN = "ds-smoke"
NO_CLUSTER = (
    "no cluster configured: set DATASPACE_K8S_CONTEXT to a kubeconfig context (see "
    "k8s/README.md, 'Smoke test on a real cluster'), or DATASPACE_K8S_SMOKE_FAKE=1 for the "
    "loopback fake"
)


@dataclass
class Cluster:
    """Where the suite runs: backend options, and the fake when it is one."""

    options: dict[str, Any]
    image: str
    fake: FakeKubernetes | None = None
    made: list[str] = field(default_factory=list)

    def backend(self, **extra: Any) -> KubernetesBackend:
        return KubernetesBackend(**{**self.options, **extra})

    def script(self, behaviour: Behaviour) -> None:
        """What only a real kubelet does, scripted on the fake (nothing on a cluster)."""
        if self.fake is not None:
            self.fake.behaviour = behaviour


def _base_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((K8S / "base").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    context = os.environ.get("DATASPACE_K8S_CONTEXT")
    use_fake = os.environ.get("DATASPACE_K8S_SMOKE_FAKE") == "1"
    if not context and not use_fake:
        pytest.skip(NO_CLUSTER)
    cache = tmp_path_factory.mktemp("smoke-cache")
    common = {"slots": "thread", "workspace_cache_dir": str(cache), "api_retry_window": 30.0}
    if use_fake:
        if not chroot_runtime_available():
            pytest.skip("the fake cluster runs containers in mount namespaces: needs root")
        with FakeKubernetes(image_binds=IMAGE_BINDS) as fake:
            fake.policy = ApiPolicy.from_manifests(_base_docs())
            options = {
                **common,
                "api_host": fake.url,
                "namespace": DEFAULT_NAMESPACE,
                "ready_timeout": 60.0,
                "path": f"{sys.prefix}/bin:{BASE_PATH}",
            }
            yield Cluster(options=options, image=DEFAULT_IMAGE, fake=fake)
            KubernetesBackend(**options).sweep({"run": RUN})
            assert fake.pod_names() == [], "the smoke suite left pods behind"
        return
    options = {
        **common,
        "context": context,
        "namespace": os.environ.get("DATASPACE_K8S_NAMESPACE", DEFAULT_NAMESPACE),
        "ready_timeout": float(os.environ.get("DATASPACE_K8S_READY_TIMEOUT", "300")),
    }
    image = os.environ.get("DATASPACE_K8S_IMAGE", DEFAULT_IMAGE)
    yield Cluster(options=options, image=image)
    KubernetesBackend(**options).sweep({"run": RUN})


def _limits(**kw: Any) -> Limits:
    return Limits(**{"wall_seconds": 120, "command_timeout": 60, "cpus": 1, **kw})


def _spec(workspace: Path, case: str, **limits: Any) -> SandboxSpec:
    return SandboxSpec(
        workspace=workspace, labels={"run": RUN, "task": case}, limits=_limits(**limits)
    )


def _run_spec(cluster: Cluster, tmp: Path, release: Path, agents: list[Any]) -> Path:
    doc = {
        "run_id": RUN,
        "release": str(release),
        "store": str(tmp / "store"),
        "agents": agents,
        "limits": {"wall_seconds": 300, "command_timeout": 60, "model_turns": 8},
        "sandbox": {
            "backend": "kubernetes",
            "image": cluster.image,
            "cpus": 1,
            "memory": "1GiB",
            "options": cluster.options,
        },
        "concurrency": 2,
    }
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run(
        [sys.executable, "-m", "dataspace.cli", *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=1500,
    )


def _solving(gold: str, *, wrong: bool) -> list[dict[str, Any]]:
    body = gold.rstrip("\n")
    if wrong:
        body = body.splitlines()[0] + "\nnobody,0"
    write = f"cat > /output/prediction.csv <<'DS_END'\n{body}\nDS_END"
    return [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls /workspace"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": write}}]},
        {
            "tool_calls": [
                {"name": "submit_answer", "arguments": {"path": "/output/prediction.csv"}}
            ]
        },
    ]


def test_doctor_then_gold_and_agent_attempts(cluster: Cluster, tmp_path: Path) -> None:
    """``dataspace doctor`` passes, then ``dataspace run``: gold 2/2, the agent 1/2."""
    from dataspace.runs.results import read_results
    from dataspace.store import open_store

    release = write_tiny_release(tmp_path / "release", tasks=2)
    gold = {t: (release / "output" / t / "gold.csv").read_text() for t in ("task_1", "task_2")}
    scripts = {
        "task_1": _solving(gold["task_1"], wrong=False),
        "task_2": _solving(gold["task_2"], wrong=True),
    }
    key_env = "DATASPACE_SMOKE_MODEL_KEY"
    ray_dir = Path(tempfile_dir())
    try:
        with ScriptedServer(scripts) as srv:
            agent = {
                "name": "agent",
                "harness": "dataspace-agent",
                "model": {"id": "scripted", "base_url": srv.url, "key_env": key_env},
            }
            gold_agent = {"name": "gold", "harness": "gold"}
            spec = _run_spec(cluster, tmp_path, release, [gold_agent, agent])
            env = {key_env: "sk-smoke-not-a-real-key", "RAY_TMPDIR": str(ray_dir)}
            doctor = _cli("doctor", str(spec), env=env)
            assert doctor.returncode == 0, doctor.stdout + doctor.stderr
            assert "ok   sandbox.pod: the attempt's pod is admitted" in doctor.stdout
            run = _cli("run", str(spec), env=env)
            assert run.returncode == 0, run.stdout + run.stderr
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)
    df = read_results(open_store(str(tmp_path / "store")).get_bytes(f"runs/{RUN}/results.parquet"))
    passed = {(r.agent, r.task_id): bool(r.passed) for r in df.itertuples()}
    assert passed == {
        ("gold", "task_1"): True,
        ("gold", "task_2"): True,
        ("agent", "task_1"): True,
        ("agent", "task_2"): False,
    }


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="dsk-", dir="/tmp")  # Ray's socket paths must stay short


def test_a_command_past_the_pods_deadline_ends_deadline(cluster: Cluster, workspace: Path) -> None:
    """The kubelet kills the pod at ``activeDeadlineSeconds`` (no grace here)."""
    cluster.script(Behaviour())
    backend = cluster.backend(deadline_grace=0.0)
    with backend.create(_spec(workspace, "deadline", wall_seconds=15)) as sb:
        result = sb.exec("sleep 120", timeout=100)
        assert result.status == "deadline", result


def test_writing_past_the_output_volume_is_a_resource_limit(
    cluster: Cluster, workspace: Path
) -> None:
    """The kubelet evicts a pod whose ``output`` emptyDir exceeds its size limit."""
    cluster.script(Behaviour(outcome="storage", on_exec=2))
    try:
        limits = {"output_bytes": 64 * 1024**2, "wall_seconds": 400, "command_timeout": 300}
        with cluster.backend().create(_spec(workspace, "evict", **limits)) as sb:
            result = sb.exec("head -c 100000000 /dev/zero > /output/big; sleep 280", timeout=290)
            assert result.status == "resource_limit", result
    finally:
        cluster.script(Behaviour())


def test_a_pod_bigger_than_the_quota_is_named_quota(cluster: Cluster) -> None:
    checks = cluster.backend().preflight_checks(
        image=cluster.image, limits=_limits(cpus=4096), labels={"run": RUN}
    )
    pod = next(c for c in checks if c.key == "pod")
    assert not pod.ok and "exceeds the namespace's quota" in pod.message, pod


def test_a_bad_image_is_an_image_pull_failure(cluster: Cluster, workspace: Path) -> None:
    cluster.script(Behaviour(outcome="image_pull"))
    try:
        backend = cluster.backend(ready_timeout=180.0)
        spec = SandboxSpec(
            workspace=workspace,
            labels={"run": RUN, "task": "bad-image"},
            limits=_limits(),
            image="registry.invalid/dataspace/no-such-image:0",
        )
        with pytest.raises(PodFailedError) as caught:
            backend.create(spec)
        assert caught.value.code in ("image_pull", "pod_pending_timeout"), caught.value
    finally:
        cluster.script(Behaviour())


PROBE = r"""
import json, os, socket
out = {}
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "open"
    except OSError as exc:
        return type(exc).__name__
out["api"] = reach(os.environ.get("KUBERNETES_SERVICE_HOST") or "10.96.0.1", 443)
out["outside"] = reach("1.1.1.1", 53)
try:
    socket.getaddrinfo("kubernetes.default.svc", 443)
    out["dns"] = "resolved"
except OSError as exc:
    out["dns"] = type(exc).__name__
out["token"] = os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token")
out["uid"] = os.getuid()
try:
    open("/workspace/x", "w")
    out["workspace"] = "writable"
except OSError:
    out["workspace"] = "readonly"
print(json.dumps(out))
"""


def test_isolation_probes_from_inside_a_pod(cluster: Cluster, workspace: Path) -> None:
    import json

    with cluster.backend().create(_spec(workspace, "isolation")) as sb:
        res = sb.exec(["python3", "-c", PROBE], timeout=60)
        assert res.exit_code == 0, res.stderr
        seen = json.loads(res.stdout)
    assert seen["api"] != "open" and seen["outside"] != "open", seen
    assert seen["dns"] != "resolved" and seen["token"] is False, seen
    assert seen["uid"] != 0 and seen["workspace"] == "readonly", seen
