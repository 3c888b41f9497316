"""What a real kubelet does to a sandbox pod, on the loopback fake, and the status it ends in.

The fake kills first and reports later, as a kubelet does: containers die (an exec ends
with 137), their end shows in the pod's status, and only then the phase and its reason.
Each case is a regression test of a status that followed the first read instead of the
cause (issue 23): a deadline is ``deadline`` (never retried), an eviction for the pod's own
limits or an OOM kill is ``resource_limit``, any other loss stays an infrastructure error.
"""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import NAMESPACE, make_backend

from dataspace.sandbox.base import Limits, SandboxSpec
from dataspace.sandbox.kubernetes import PodFailedError
from dataspace.testing.fake_k8s import Behaviour, FakeKubernetes

LABELS = {"run": "r1", "agent": "gold", "task": "task_1", "attempt": "1"}


def spec(workspace: Path, **limits: float) -> SandboxSpec:
    values: dict[str, float] = {"wall_seconds": 120, "command_timeout": 30, "cpus": 1}
    values.update(limits)
    return SandboxSpec(workspace=workspace, labels=LABELS, limits=Limits(**values))  # type: ignore[arg-type]


def test_a_deadline_reported_after_the_kill_is_a_deadline(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards: a pod past activeDeadlineSeconds whose exec ends (137) before its phase says
    Failed/DeadlineExceeded ended ``k8s_api`` (an infrastructure error, retried: the model
    paid twice) instead of ``deadline``."""
    fake.status_delay = 0.6
    fake.behaviour = Behaviour(outcome="deadline", on_exec=2, after=0.3)
    with make_backend(fake, tmp_path).create(spec(workspace)) as sandbox:
        result = sandbox.exec("sleep 5")
        assert result.status == "deadline", result
        assert "DeadlineExceeded" in result.stderr
        assert sandbox.exec("true").status == "deadline"
        # files of a pod ended at its deadline fail as the agent's outcome, not as a sandbox
        # failure (a SandboxError is an infrastructure error: the attempt would run again)
        with pytest.raises(OSError, match="DeadlineExceeded") as caught:
            sandbox.write_file("answer.csv", b"a\n1\n")
        assert caught.value.errno == errno.ETIME
        assert sandbox.collect(tmp_path / "out") == []


def test_an_emptydir_eviction_is_a_resource_limit_not_a_completed_container(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards: after an eviction for the output folder's sizeLimit the helper (PID 1) exits
    0 on SIGTERM; the container reads ``Completed`` while the phase still says Running, and
    the sandbox reported ``pod_failed`` instead of ``resource_limit``."""
    fake.status_delay = 0.6
    fake.behaviour = Behaviour(outcome="storage", on_exec=2)
    with make_backend(fake, tmp_path).create(spec(workspace)) as sandbox:
        result = sandbox.exec("sleep 5")
        assert result.status == "resource_limit", result
        assert 'Usage of EmptyDir volume "output" exceeds the limit "1Gi"' in result.stderr
        pod = fake.pod(NAMESPACE, sandbox.name)
        assert pod is not None
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
        assert sandbox.exec("true").status == "resource_limit"
        with pytest.raises(OSError, match="Evicted") as caught:
            sandbox.read_file("answer.csv")
        assert caught.value.errno == errno.ENOSPC


def test_writing_past_the_output_folders_size_limit_is_an_eviction_and_a_resource_limit(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """The fake's eviction manager measures the emptyDir (no scripted trigger): past its
    ``sizeLimit`` the pod is evicted with the kubelet's message, and the command that
    wrote it ends ``resource_limit``."""
    fake.eviction_interval = 0.3
    fake.status_delay = 0.4
    with make_backend(fake, tmp_path).create(spec(workspace, output_bytes=1024**2)) as sandbox:
        assert sandbox.exec("head -c 100000 /dev/zero > small").status == "ok"
        result = sandbox.exec("head -c 3000000 /dev/zero > big && sleep 30")
        assert result.status == "resource_limit", result
        assert 'Usage of EmptyDir volume "output" exceeds the limit "1Mi". ' in result.stderr
        pod = fake.pod(NAMESPACE, sandbox.name)
        assert pod is not None and pod["status"]["reason"] == "Evicted"


def test_the_kubelets_events_tell_the_end_when_the_phase_is_late(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards: a pod whose phase update is later than ``settle_timeout`` still ends with the
    cause its Warning event (recorded as the kubelet killed it) names."""
    fake.status_delay = 6.0
    fake.behaviour = Behaviour(outcome="deadline", on_exec=2, after=0.2)
    backend = make_backend(fake, tmp_path, settle_timeout=0.5)
    with backend.create(spec(workspace)) as sandbox:
        result = sandbox.exec("sleep 5")
        assert result.status == "deadline", result
        assert "longer than the specified deadline" in result.stderr


def test_a_node_pressure_eviction_stays_an_infrastructure_failure(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    fake.status_delay = 0.6
    fake.behaviour = Behaviour(outcome="evict", on_exec=2)
    with make_backend(fake, tmp_path).create(spec(workspace)) as sandbox:
        with pytest.raises(PodFailedError) as caught:
            sandbox.exec("sleep 5")
        assert caught.value.code == "pod_evicted"
        assert "The node was low on resource: memory" in str(caught.value)


def test_a_pod_deleted_under_the_sandbox_stays_pod_gone(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards: reading the pod until its phase settles must not turn a pod that vanished
    (deleted by someone else, its node lost) into an agent outcome."""
    backend = make_backend(fake, tmp_path)
    with backend.create(spec(workspace)) as sandbox:
        started = threading.Event()

        def delete_soon() -> None:
            started.wait(10)
            backend.api.delete_pod(NAMESPACE, sandbox.name)

        deleter = threading.Thread(target=delete_soon)
        deleter.start()
        started.set()
        with pytest.raises(PodFailedError) as caught:
            sandbox.exec("sleep 10")
        deleter.join()
        assert caught.value.code == "pod_gone"


def test_commands_do_not_see_what_the_kubelet_injects(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    """Guards: every command saw ``KUBERNETES_SERVICE_HOST=10.96.0.1`` and its siblings,
    which the kubelet adds despite ``enableServiceLinks: false`` (the container's own
    environment holds them: the helper must drop them)."""
    from dataspace.testing.fake_k8s import KUBELET_ENV

    if fake.runtime != "chroot":
        pytest.skip("reading the container's PID 1 needs the fake's chroot runtime (root)")
    with make_backend(fake, tmp_path).create(spec(workspace)) as sandbox:
        # the container's first process (the helper) has them, as on a cluster
        init_env = sandbox.exec(["sh", "-c", "tr '\\0' '\\n' < /proc/1/environ"])
        assert "KUBERNETES_SERVICE_HOST=10.96.0.1" in init_env.stdout.splitlines()
        listed = sandbox.exec("env", env={"MINE": "1"})
        names = {line.split("=", 1)[0] for line in listed.stdout.splitlines()}
        assert names.isdisjoint(KUBELET_ENV), sorted(names & set(KUBELET_ENV))
        assert {"MINE", "PATH", "HOME", "LANG", "TMPDIR"} <= names


@pytest.mark.parametrize(
    "command",
    [
        "python3 -c 'bytearray(1 << 30)'",  # dash forks python3: the shell itself exits 137
        ["python3", "-c", "bytearray(1 << 30)"],
    ],
    ids=["string-under-sh", "argv"],
)
def test_an_oom_kill_inside_a_command_is_a_resource_limit(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path, command: str | list[str]
) -> None:
    """Guards: a string command runs under ``/bin/sh -c``; the kernel OOM-kills the shell's
    child, the shell exits 137, and only a direct SIGKILL of the command counted, so the
    command ended ``status=ok exit=137 stderr='Killed'`` instead of ``resource_limit``."""
    if not fake.memory_cgroups:
        pytest.skip("the fake gives containers memory cgroups only as root with cgroups")
    backend = make_backend(fake, tmp_path)
    with backend.create(spec(workspace, memory_bytes=192 * 1024**2)) as sandbox:
        result = sandbox.exec(command)
        assert (result.status, result.exit_code) == ("resource_limit", 137), result
        # the container lives on (the OOM killer took one process): the next command runs
        after = sandbox.exec("echo still here")
        assert (after.status, after.stdout) == ("ok", "still here\n")


# ---- pending with a cause -------------------------------------------------------------------


def test_requests_that_fit_no_node_fail_the_start_with_the_schedulers_words(
    workspace: Path, tmp_path: Path
) -> None:
    """Guards: a pod whose requests fit no node waited out the whole ``ready_timeout`` and
    ended ``pod_pending_timeout``; now its ``FailedScheduling`` Warning ends the start."""
    with FakeKubernetes(node_allocatable={"cpu": "2", "memory": "64Gi"}) as fake:
        backend = make_backend(fake, tmp_path, ready_timeout=30, unschedulable_timeout=0.5)
        with pytest.raises(PodFailedError) as caught:
            backend.create(spec(workspace, cpus=4))
        assert caught.value.code == "pod_unschedulable"
        assert "FailedScheduling: 0/1 nodes are available: 1 Insufficient cpu." in str(caught.value)
        assert fake.pod_names() == []


def test_a_pod_waiting_for_room_starts_when_another_pod_ends(
    workspace: Path, tmp_path: Path
) -> None:
    """The fake schedules by requests: the second pod fits only once the first is gone."""
    with FakeKubernetes(node_allocatable={"cpu": "2", "memory": "64Gi"}) as fake:
        backend = make_backend(fake, tmp_path)
        first = backend.create(spec(workspace, cpus=1.5))
        made = []
        second = threading.Thread(
            target=lambda: made.append(backend.create(spec(workspace, cpus=1.5, wall_seconds=60)))
        )
        second.start()
        try:
            for _ in range(200):  # until the second pod was turned away once (bounded)
                pending = [n for n in fake.pod_names() if n != first.name]
                events = backend.api.pod_events(NAMESPACE, pending[0]) if pending else []
                if any(e["reason"] == "FailedScheduling" for e in events):
                    break
                threading.Event().wait(0.05)
            assert "1 Insufficient cpu" in events[-1]["message"]
            first.close()
            second.join(30)
            assert made and made[0].exec("echo up").stdout == "up\n"
        finally:
            first.close()
            second.join(30)
            for sandbox in made:
                sandbox.close()


def test_a_runtime_without_user_namespaces_fails_the_start_with_its_event(
    workspace: Path, tmp_path: Path
) -> None:
    """Guards: ``hostUsers: false`` on a runtime without user namespaces leaves the pod
    ContainerCreating with ``FailedCreatePodSandBox`` Warnings only; the start waited out
    ``ready_timeout`` with no cause."""
    with FakeKubernetes(user_namespaces=False) as fake:
        backend = make_backend(
            fake, tmp_path, host_users=False, ready_timeout=30, start_warning_timeout=0.5
        )
        with pytest.raises(PodFailedError) as caught:
            backend.create(spec(workspace))
        assert caught.value.code == "pod_start_failed"
        assert (
            "FailedCreatePodSandBox: Failed to create pod sandbox: can't set "
            "`spec.hostUsers: false`, runtime does not support user namespaces"
        ) in str(caught.value)
        assert fake.pod_names() == []


def test_a_missing_claim_fails_the_start_with_its_event(workspace: Path, tmp_path: Path) -> None:
    """Guards: a workspace volume whose PersistentVolumeClaim does not exist left the pod
    Pending (a ``FailedScheduling`` Warning only) until ``ready_timeout``."""
    with FakeKubernetes() as fake:
        backend = make_backend(
            fake,
            tmp_path,
            ready_timeout=30,
            start_warning_timeout=0.5,
            workspace_cache_dir=str(tmp_path / "shared"),
            workspace_volume={"persistentVolumeClaim": {"claimName": "workspaces"}},
        )
        with pytest.raises(PodFailedError) as caught:
            backend.create(spec(workspace))
        assert caught.value.code == "pod_start_failed"
        assert 'persistentvolumeclaim "workspaces" not found' in str(caught.value)
        assert fake.pod_names() == []
