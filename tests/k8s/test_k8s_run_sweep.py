"""``dataspace run`` on the kubernetes backend sweeps its own run's leftover pods.

A pod can outlive its attempt (a controller that crashed, a close that failed while the API
server was down); before, only ``ray_jobs.sweep`` deleted it and it lived until its
``activeDeadlineSeconds`` (3,960 s with the benchmark spec). Now a run and its resume
delete the pods labelled with their run before the first attempt and after the last, and
leave every other run's pods alone.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runs"))
from cli_helpers import cli_env, dataspace, short_ray_dir
from k8s_support import IMAGE_BINDS, NAMESPACE, make_backend

from dataspace.sandbox.base import Limits, SandboxSpec
from dataspace.sandbox.kubernetes import BASE_PATH
from dataspace.testing.fake_k8s import FakeKubernetes, chroot_runtime_available
from dataspace.testing.releases import write_tiny_release

pytestmark = [pytest.mark.integration, pytest.mark.ray, pytest.mark.timeout(600)]


def test_a_run_deletes_its_own_leftover_pods_and_no_others(tmp_path: Path) -> None:
    if not chroot_runtime_available():
        pytest.skip("the fake cluster runs containers in mount namespaces: needs root and unshare")
    release = write_tiny_release(tmp_path / "release", tasks=1)
    ray_dir = short_ray_dir()
    with FakeKubernetes(image_binds=IMAGE_BINDS) as fake:
        backend = make_backend(fake, tmp_path)
        limits = Limits(wall_seconds=120, command_timeout=30, cpus=1)
        # a crashed controller's pod of this run, and a live pod of another run
        leftover = backend.create(
            SandboxSpec(workspace=release, labels={"run": "r1", "task": "task_1"}, limits=limits)
        )
        other = backend.create(
            SandboxSpec(workspace=release, labels={"run": "other"}, limits=limits)
        )
        spec = {
            "run_id": "r1",
            "release": str(release),
            "store": str(tmp_path / "store"),
            "agents": [{"name": "gold", "harness": "gold"}],
            "limits": {"wall_seconds": 120, "command_timeout": 30},
            "sandbox": {
                "backend": "kubernetes",
                "cpus": 1,
                "memory": "1GiB",
                "options": {
                    "api_host": fake.url,
                    "namespace": NAMESPACE,
                    "slots": "thread",
                    "api_backoff_base": 0.02,
                    "workspace_cache_dir": str(tmp_path / "cache"),
                    "path": f"{sys.prefix}/bin:{BASE_PATH}",
                },
            },
            "concurrency": 1,
        }
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(spec))
        try:
            p = dataspace("run", str(path), env=cli_env(ray_dir))
        finally:
            shutil.rmtree(ray_dir, ignore_errors=True)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "leftover sandboxes of this run deleted: 1" in p.stdout
        assert fake.pod_names() == [other.name]  # the leftover is gone, the other run's kept
        # the leftover and the attempt's own: the leftover's start put the image on the node
        # (a kubelet lists the images it ran), so preflight needed no one-off pod to pull it
        assert fake.calls["delete pods"] == 2
        assert other.exec("echo alive").stdout == "alive\n"
        other.close()
        leftover.close()  # already swept: closes quietly
