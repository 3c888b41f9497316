"""The pod controller against the loopback fake cluster: every way a pod can end.

Each case ends with the right status (or error code) and no pod left behind: the ``fake``
fixture asserts the fake holds no pods when the test ends.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import make_backend

from dataspace.errors import SandboxError
from dataspace.sandbox.base import Limits, SandboxSpec
from dataspace.sandbox.kubernetes import KubernetesSandbox, PodFailedError
from dataspace.testing.fake_k8s import RUNTIME_MANIFEST, Behaviour, FakeKubernetes

LABELS = {"run": "r1", "agent": "gold", "task": "task_1", "attempt": "1"}


def spec(workspace: Path, **labels: str) -> SandboxSpec:
    return SandboxSpec(
        workspace=workspace,
        labels={**LABELS, **labels},
        limits=Limits(wall_seconds=120, command_timeout=30),
    )


def test_normal_completion(fake: FakeKubernetes, workspace: Path, tmp_path: Path) -> None:
    backend = make_backend(fake, tmp_path)
    sandbox = backend.create(spec(workspace))
    assert fake.pod_names("ds-test") == [sandbox.name]
    pod = fake.pod("ds-test", sandbox.name)
    assert pod is not None
    assert pod["metadata"]["labels"]["dataspace.io/run"] == "r1"
    result = sandbox.exec("cat /workspace/data.csv > copy.csv && echo done")
    assert (result.exit_code, result.stdout, result.status) == (0, "done\n", "ok")
    listing = sandbox.exec("ls -R /workspace; touch /workspace/new.txt")
    assert "notes.md" in listing.stdout and "Read-only file system" in listing.stderr
    copied = sandbox.collect(tmp_path / "out")
    assert [p.name for p in copied] == ["copy.csv"]
    info = sandbox.info()
    assert info["backend"] == "kubernetes" and info["node"] == "fake-node-1"
    assert info["staging"]["mode"] == "stream"  # type: ignore[index]
    sandbox.close()
    sandbox.close()
    assert fake.pod_names() == []
    assert fake.calls["create pods"] == 1 and fake.calls["delete pods"] == 1
    assert fake.calls["exec pods"] == 5  # staging, the manifest, two commands, the collection


def test_image_pull_failure_is_an_infrastructure_error_with_events(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.behaviour = Behaviour(outcome="image_pull")
    backend = make_backend(fake, tmp_path)
    with pytest.raises(PodFailedError) as caught:
        backend.create(spec(workspace))
    assert caught.value.code == "image_pull"
    assert "ImagePullBackOff" in str(caught.value)
    assert "Failed to pull image" in caught.value.events
    assert fake.pod_names() == []


def test_pending_past_the_timeout_reports_the_pods_events(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.behaviour = Behaviour(outcome="unschedulable")
    backend = make_backend(fake, tmp_path, ready_timeout=1.0)
    with pytest.raises(PodFailedError) as caught:
        backend.create(spec(workspace))
    assert caught.value.code == "pod_pending_timeout"
    assert "FailedScheduling" in caught.value.events
    assert "Insufficient cpu" in str(caught.value)
    assert isinstance(caught.value, SandboxError)
    assert fake.pod_names() == []


def test_oom_killed_container_is_a_resource_limit(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.behaviour = Behaviour(outcome="oom", on_exec=2)  # exec 1 reads the runtime manifest
    sandbox = make_backend(fake, tmp_path).create(spec(workspace))
    result = sandbox.exec("sleep 5")
    assert (result.status, result.exit_code) == ("resource_limit", 137)
    assert "OOMKilled" in result.stderr
    again = sandbox.exec("true")
    assert again.status == "resource_limit"
    assert sandbox.collect(tmp_path / "out") == []
    sandbox.close()


def test_eviction_for_node_pressure_is_an_infrastructure_failure(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.behaviour = Behaviour(outcome="evict", on_exec=2)  # exec 1 reads the runtime manifest
    sandbox = make_backend(fake, tmp_path).create(spec(workspace))
    with pytest.raises(PodFailedError) as caught:
        sandbox.exec("sleep 5")
    assert caught.value.code == "pod_evicted"
    assert "low on resource" in str(caught.value)
    sandbox.close()


def test_eviction_for_its_own_storage_limit_is_a_resource_limit(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.behaviour = Behaviour(outcome="storage", on_exec=2)  # exec 1 reads the runtime manifest
    sandbox = make_backend(fake, tmp_path).create(spec(workspace))
    result = sandbox.exec("sleep 5")
    assert result.status == "resource_limit"
    sandbox.close()


def test_active_deadline_ends_commands_with_status_deadline(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.behaviour = Behaviour(outcome="deadline", on_exec=2, after=0.3)
    sandbox = make_backend(fake, tmp_path).create(spec(workspace))
    result = sandbox.exec("sleep 5")
    assert result.status == "deadline"
    assert sandbox.exec("true").status == "deadline"
    sandbox.close()


def test_api_server_5xx_answers_are_retried(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.fail_next("POST", "/pods", 503, count=2)
    fake.fail_next("GET", "/exec", 500, count=1)
    fake.fail_next("DELETE", "/pods/", 502, count=1)
    sandbox = make_backend(fake, tmp_path).create(spec(workspace))
    assert sandbox.exec("echo ok").stdout == "ok\n"
    sandbox.close()
    assert fake.calls["create pods"] == 3
    assert fake.calls["delete pods"] == 2
    assert fake.created_total == 1


def test_api_server_failing_for_good_leaves_no_pod(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.fail_next("POST", "/pods", 503, count=50)
    with pytest.raises(PodFailedError) as caught:
        make_backend(fake, tmp_path, api_retries=3).create(spec(workspace))
    assert caught.value.code == "k8s_api"
    assert fake.calls["create pods"] == 3


def test_a_lost_create_answer_adopts_the_pod_instead_of_making_a_second(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.fail_next("POST", "/pods", 500, after_effect=True)
    sandbox = make_backend(fake, tmp_path).create(spec(workspace))
    assert fake.created_total == 1
    assert fake.pod_names() == [sandbox.name]
    sandbox.close()


def test_a_409_name_clash_retries_under_a_new_name(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.fail_next("POST", "/pods", 409)
    sandbox = make_backend(fake, tmp_path).create(spec(workspace))
    assert fake.calls["create pods"] == 2
    assert fake.created_total == 1
    assert sandbox.exec("true").exit_code == 0
    sandbox.close()


def test_pending_pods_hold_creation_slots_but_ready_ones_do_not(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.behaviour = Behaviour(start_delay=0.3)
    backend = make_backend(fake, tmp_path, max_pending=1)
    made: list[KubernetesSandbox] = []
    lock = threading.Lock()

    def create(n: int) -> None:
        sandbox = backend.create(spec(workspace, attempt=str(n)))
        with lock:
            made.append(sandbox)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert len(made) == 3  # all ready at once: ready pods hold no creation slot
        assert len(fake.pod_names()) == 3
        assert fake.max_pending_seen == 1  # never two pods pending together
    finally:
        for sandbox in made:
            sandbox.close()


def test_sweep_deletes_every_pod_of_a_run_across_pages(workspace: Path, tmp_path: Path) -> None:
    with FakeKubernetes(page_size=2) as fake:
        backend = make_backend(fake, tmp_path)
        mine = [backend.create(spec(workspace, attempt=str(n))) for n in range(1, 4)]
        other = backend.create(spec(workspace, run="r2"))
        assert backend.sweep({"run": "r1"}) == 3
        assert fake.pod_names() == [other.name]
        assert fake.calls["list pods"] >= 2  # paginated
        for sandbox in [*mine, other]:
            sandbox.close()  # already swept pods close quietly
        assert fake.pod_names() == []


def test_a_shared_volume_workspace_is_fetched_once(workspace: Path, tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    with FakeKubernetes(claims={"workspaces": cache}) as fake:
        backend = make_backend(
            fake,
            tmp_path,
            workspace_cache_dir=str(cache),
            workspace_volume={
                "persistentVolumeClaim": {"claimName": "workspaces", "readOnly": True}
            },
        )
        first = backend.create(spec(workspace))
        second = backend.create(spec(workspace, attempt="2"))
        try:
            one, two = first.info()["staging"], second.info()["staging"]
            assert one["mode"] == "volume" and one["fetched_bytes"] > 0  # type: ignore[index]
            assert two["cache_hit"] is True and two["fetched_bytes"] == 0  # type: ignore[index]
            mount = second.manifest["spec"]["containers"][0]["volumeMounts"][0]
            assert mount["readOnly"] is True and mount["subPath"].startswith("ws/")
            assert "initContainers" not in second.manifest["spec"]
            assert second.exec("cat /workspace/data.csv").stdout.startswith("id,name")
            assert second.exec("touch /workspace/x").exit_code != 0
        finally:
            first.close()
            second.close()
        assert fake.pod_names() == []


def test_unknown_options_are_one_line_config_errors(tmp_path: Path) -> None:
    from dataspace.errors import ConfigError
    from dataspace.sandbox.kubernetes import KubernetesBackend

    with pytest.raises(ConfigError, match=r"unknown option.*namespce"):
        KubernetesBackend(namespce="x")
    with pytest.raises(ConfigError, match="workspace_cache_dir"):
        KubernetesBackend(workspace_volume={"emptyDir": {}})


def _image_folder(tmp_path: Path, content: bytes | None) -> dict[str, Path]:
    folder = tmp_path / "image-opt-dataspace"
    folder.mkdir()
    if content is not None:
        (folder / "runtime-manifest.json").write_bytes(content)
    return {"/opt/dataspace": folder}


def test_info_records_the_runtime_manifest_the_pod_serves(workspace: Path, tmp_path: Path) -> None:
    import json

    from dataspace.sandbox.workbench import manifest_identity

    served = {**RUNTIME_MANIFEST, "tools_sha256": "ab" * 32, "python": "3.11.9"}
    folders = _image_folder(tmp_path, json.dumps(served).encode())
    with FakeKubernetes(image_folders=folders) as fake:
        backend = make_backend(fake, tmp_path)
        with backend.create(spec(workspace)) as sandbox:
            runtime = sandbox.info()["runtime"]
            assert runtime == manifest_identity(served)
            assert runtime["tools_sha256"] == "ab" * 32  # type: ignore[index]
            assert "python_packages" not in runtime  # type: ignore[operator]
        assert fake.pod_names() == []


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (None, "No such file"),
        (b"{not json", "Expecting property name"),
        (b'{"runtime": "Data Workbench Runtime", "runtime": "x"}', "duplicate key"),
        (b'{"runtime": "Data Workbench Runtime", "runtime_version": "1.0"}', "no tools_sha256"),
        (b'{"runtime": "' + b"x" * (1024**2) + b'"}', "larger than 1048576 bytes"),
    ],
    ids=["missing", "not-json", "duplicate-key", "incomplete", "too-large"],
)
def test_an_image_without_a_readable_manifest_is_refused(
    workspace: Path, tmp_path: Path, content: bytes | None, why: str
) -> None:
    with FakeKubernetes(image_folders=_image_folder(tmp_path, content)) as fake:
        backend = make_backend(fake, tmp_path, image="example.org/plain-python:3.11")
        with pytest.raises(PodFailedError) as caught:
            backend.create(spec(workspace))
        message = str(caught.value)
        assert caught.value.code == "runtime_manifest"
        assert "image example.org/plain-python:3.11" in message
        assert "/opt/dataspace/runtime-manifest.json" in message
        assert why in message and "images/build.sh" in message
        assert fake.pod_names() == []  # the pod was deleted


def test_preflight_asks_the_cluster_not_only_the_options(
    fake: FakeKubernetes, tmp_path: Path
) -> None:
    """``dataspace doctor`` on a Kubernetes spec makes one API call: it says the API answers
    (and how many sandbox pods the namespace holds), or fails with why it does not."""
    from k8s_support import NAMESPACE

    from dataspace.runs.preflight import check_spec
    from dataspace.runs.spec import parse_spec

    def sandbox_check(api_host: str):
        spec = parse_spec(
            {
                "run_id": "pf",
                "release": str(tmp_path),
                "store": str(tmp_path / "store"),
                "agents": [{"name": "gold", "harness": "gold"}],
                "sandbox": {
                    "backend": "kubernetes",
                    "image": "ds-runtime:1",
                    "options": {"api_host": api_host, "namespace": NAMESPACE,
                                "api_backoff_base": 0.01},
                },
            },
            source="test",
        )  # fmt: skip
        checks = check_spec(spec, call_models=False, check_release=False).checks
        return next(c for c in checks if c.key == "sandbox")

    up = sandbox_check(fake.url)
    assert up.ok, up.message
    assert f"Kubernetes API reachable, namespace {NAMESPACE}: 0 sandbox pods" in up.message
    down = sandbox_check("http://127.0.0.1:9")  # nothing listens on the discard port
    assert not down.ok
    assert "list pods in ds-test" in down.message and "127.0.0.1" in down.message
