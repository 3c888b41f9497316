"""Workspaces reach pods from a shared volume by default, not through the API server.

With a claim of the sandbox namespace labelled ``dataspace.io/workspace-cache: "true"``
(``k8s/base/workspace-volume.yaml``) whose storage the controller sees, the controller
writes each workspace into it once and the pods mount their folder read-only: no staging
exec, no workspace byte through the API server. Without one, the workspace is streamed
over exec as before. The fake models the volume as a host folder shared by the test's
controller side and the fake's pods, and counts the bytes of every exec.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import IMAGE_BINDS, NAMESPACE, make_backend

from dataspace.runs.attempt import AttemptRequest, run_attempt
from dataspace.runs.layout import RunLayout
from dataspace.runs.spec import AgentSpec, Limits, SandboxConfig
from dataspace.sandbox.base import Limits as SandboxLimits
from dataspace.sandbox.base import PreflightRequest, SandboxSpec
from dataspace.sandbox.kubernetes import BASE_PATH
from dataspace.sandbox.kubernetes._staging import CLAIM_LABEL, CONTROLLER_PATH_ANNOTATION
from dataspace.store import open_store
from dataspace.testing.fake_k8s import FakeKubernetes, chroot_runtime_available
from dataspace.testing.releases import write_tiny_release

CLAIM = "dataspace-workspaces"
LISTING = "cd /workspace && find . -type f | sort | xargs sha256sum"


def _label_claim(fake: FakeKubernetes, shared: Path) -> None:
    shared.mkdir(exist_ok=True)
    fake.add_claim(
        CLAIM,
        shared,
        labels={CLAIM_LABEL: "true"},
        annotations={CONTROLLER_PATH_ANNOTATION: str(shared)},
    )


def _host_listing(folder: Path) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return "".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  ./{p.relative_to(folder).as_posix()}\n"
        for p in files
    )


def _attempt(fake: FakeKubernetes, release: Path, tmp_path: Path, n: int) -> dict[str, Any]:
    """One gold attempt through ``run_attempt``; its run.json."""
    options = {
        "api_host": fake.url,
        "namespace": NAMESPACE,
        "slots": "thread",
        "workspace_cache_dir": str(tmp_path / "local-cache"),
        "path": f"{sys.prefix}/bin:{BASE_PATH}",
    }
    store = tmp_path / "store"
    row = run_attempt(
        AttemptRequest(
            run_id="vol",
            store_uri=str(store),
            release_root=str(release),
            agent=AgentSpec(name="gold", harness="gold"),
            task_id="task_1",
            attempt=n,
            key=f"k{n}",
            limits=Limits(wall_seconds=120, command_timeout=30, cpus=1),
            sandbox=SandboxConfig(backend="kubernetes", options=options),
            submitted_at=time.time(),
        )
    )
    assert (row["status"], row["passed"]) == ("submitted", True)
    adir = RunLayout(run_id="vol").attempt("gold", "task_1", n)
    return json.loads(open_store(str(store)).get_bytes(f"{adir}/run.json"))


def _stage_bytes(fake: FakeKubernetes, pod: str) -> tuple[int, int]:
    """(staging execs, bytes sent into them) for one pod."""
    stage = [e for e in fake.exec_log if e["pod"] == pod and e["container"] == "stage"]
    return len(stage), sum(e["stdin_bytes"] for e in stage)


@pytest.mark.integration
def test_a_labelled_claim_is_used_by_default_and_no_workspace_crosses_the_api(
    tmp_path: Path,
) -> None:
    if not chroot_runtime_available():
        pytest.skip("the fake cluster mounts volumes in mount namespaces: needs root and unshare")
    release = write_tiny_release(tmp_path / "release", tasks=1)
    context = release / "input" / "task_1" / "context"
    size = sum(p.stat().st_size for p in context.rglob("*") if p.is_file())
    with FakeKubernetes(image_binds=IMAGE_BINDS) as plain:  # a cluster without the claim
        streamed = _attempt(plain, release, tmp_path, 1)
        assert plain.pod_names() == []
    with FakeKubernetes(image_binds=IMAGE_BINDS) as fake:
        _label_claim(fake, tmp_path / "shared")
        first = _attempt(fake, release, tmp_path, 2)
        second = _attempt(fake, release, tmp_path, 3)
        assert fake.pod_names() == []

    assert streamed["sandbox"]["staging"]["mode"] == "stream"
    execs, sent = _stage_bytes(plain, streamed["sandbox"]["pod"])
    assert execs == 1 and sent >= size  # the tar of the workspace, through the API server

    for run in (first, second):
        staging = run["sandbox"]["staging"]
        assert (staging["mode"], staging["volume"]) == ("volume", f"pvc/{CLAIM}")
        assert _stage_bytes(fake, run["sandbox"]["pod"]) == (0, 0)
    # the controller wrote the workspace into the volume once, for the task's first attempt
    assert first["sandbox"]["staging"]["fetched_bytes"] == size
    assert second["sandbox"]["staging"]["cache_hit"] is True
    key = first["sandbox"]["staging"]["cache_key"]
    assert _host_listing(tmp_path / "shared" / "ws" / key) == _host_listing(context)


def test_the_agent_sees_the_same_workspace_from_the_volume_read_only(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    limits = SandboxLimits(wall_seconds=120, command_timeout=30)
    spec = SandboxSpec(workspace=workspace, labels={"run": "vol"}, limits=limits)
    with make_backend(fake, tmp_path).create(spec) as sandbox:
        streamed = sandbox.exec(LISTING).stdout
    _label_claim(fake, tmp_path / "shared")
    backend = make_backend(fake, tmp_path, workspace_cache_dir=str(tmp_path / "other"))
    with backend.create(spec) as sandbox:
        assert sandbox.info()["staging"]["mode"] == "volume"  # type: ignore[index]
        mounted = sandbox.exec(LISTING).stdout
        assert sandbox.exec("touch /workspace/x").exit_code != 0
        pod = fake.pod(NAMESPACE, sandbox.name)
        assert pod is not None
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "workspace")
        assert volume == {
            "name": "workspace",
            "persistentVolumeClaim": {"claimName": CLAIM, "readOnly": True},
        }
    assert mounted == streamed == _host_listing(workspace)
    staging = next(c for c in backend.preflight(PreflightRequest(limits=limits))
                   if c.key == "sandbox.staging")  # fmt: skip
    assert staging.line() == (
        f"ok   sandbox.staging: volume pvc/{CLAIM} (read-only), written once per workspace by "
        f"the controller at {tmp_path / 'shared'} (the claim labelled {CLAIM_LABEL}=true); "
        "nothing is streamed through the API server"
    )


def test_without_a_claim_or_with_stream_the_workspace_is_streamed(
    fake: FakeKubernetes, workspace: Path, tmp_path: Path
) -> None:
    _label_claim(fake, tmp_path / "shared")
    backend = make_backend(fake, tmp_path, workspace_volume="stream")
    limits = SandboxLimits(wall_seconds=120, command_timeout=30)
    with backend.create(SandboxSpec(workspace=workspace, limits=limits)) as sandbox:
        assert sandbox.info()["staging"]["mode"] == "stream"  # type: ignore[index]
        assert _stage_bytes(fake, sandbox.name)[0] == 1


def test_the_stage_answer_is_in_the_pipe_before_the_marker_ends_the_init_container(
    tmp_path: Path,
) -> None:
    """Guards: ``stage`` wrote its marker before its answer. ``stage-wait``, PID 1 of the
    init container, then exited, the kernel killed the exec with its PID namespace, and a
    start under load failed ``staging`` (exit 137, no answer). Here the answer cannot leave
    (stdout is a full pipe): the marker must not appear until it has."""
    import io
    import os
    import subprocess
    import tarfile

    from dataspace.sandbox.kubernetes._exec import encode_args, helper_argv, parse_frame

    root = tmp_path / "root"
    (root / "stage").mkdir(parents=True)
    (root / "workspace").mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        body = b"id\n1\n"
        info = tarfile.TarInfo("data.csv")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    data = buf.getvalue()
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    filler = 0
    for size in (4096, 1):  # full to the last byte
        while True:
            try:
                filler += os.write(write_end, b"x" * size)
            except BlockingIOError:
                break
    os.set_blocking(write_end, True)
    env = {"PATH": os.environ["PATH"], "DS_SANDBOX_ROOT": str(root)}
    argv = [*helper_argv(sys.executable), "stage", encode_args({"size": len(data)})]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=write_end, env=env)
    os.close(write_end)
    try:
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
        unpacked = root / "workspace" / "data.csv"
        end = time.monotonic() + 30
        # the file is made empty, then written: wait for its bytes
        while not (unpacked.exists() and unpacked.read_bytes()) and time.monotonic() < end:
            time.sleep(0.01)
        assert unpacked.read_bytes() == b"id\n1\n"
        time.sleep(0.5)  # the helper is blocked writing its answer
        assert proc.poll() is None
        assert not (root / "stage" / "staged").exists(), "marker before the answer"
        out = bytearray()
        with os.fdopen(read_end, "rb") as reader:
            while chunk := reader.read(65536):
                out += chunk
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    frame = parse_frame(bytes(out[filler:]))
    assert frame is not None and frame[0] == {"ok": True, "files": 1, "bytes": 5}
    assert (root / "stage" / "staged").read_text() == "1 5\n"
