"""A run waits for the pre-pull: no attempt's pod starts before every node holds the image.

``KubernetesBackend.wait_ready`` (the sandbox contract's ``wait_ready``, called by the
controller once before fan-out) reads the nodes until every schedulable one lists the
runtime image, showing what it waits for; past ``image_wait`` the run stops with one line
and exit code 1, nothing recorded. Against the loopback fake, whose nodes report the
images they hold (a scripted pull ends on a node after N seconds).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runs"))
from cli_helpers import cli_env, dataspace
from k8s_support import NAMESPACE, make_backend

from dataspace.checks import Check
from dataspace.errors import SandboxError
from dataspace.sandbox.base import Limits, PreflightRequest
from dataspace.sandbox.kubernetes import BASE_PATH
from dataspace.testing.fake_k8s import FakeKubernetes
from dataspace.testing.fake_k8s.policy import NODE, node
from dataspace.testing.releases import write_tiny_release

IMAGE = "registry.test/dataspace/runtime:1.0"
REQUEST = PreflightRequest(image=IMAGE, limits=Limits(cpus=1, memory_bytes=1024**3))


def test_fan_out_waits_until_the_last_node_has_pulled_the_image(
    fake: FakeKubernetes, tmp_path: Path
) -> None:
    fake.policy.nodes = [node(NODE, images=[IMAGE]), node("node-2"), node("cordoned")]
    fake.policy.nodes[-1]["spec"]["unschedulable"] = True  # never waited for
    backend = make_backend(fake, tmp_path, image_wait=60, image_poll=0.1)
    pull = 1.5
    lines: list[Check] = []
    started = time.monotonic()
    fake.node_gets_image("node-2", IMAGE, after=pull)
    backend.wait_ready(REQUEST, lines.append)
    returned = time.monotonic()

    assert returned >= fake.image_arrivals[("node-2", IMAGE)]  # not one moment earlier
    assert returned - started >= pull
    first, last = lines[0], lines[-1]
    assert first.line() == (
        f"warn sandbox.prepull: waiting for 1 of 2 schedulable nodes to hold {IMAGE} "
        "(pre-pull DaemonSet runtime-prepull): 0 s of at most 60 s; not yet on node-2"
    )
    assert last.ok and not last.warning
    assert last.message.startswith(f"{IMAGE} is on every schedulable node (2) after ")
    assert last.message.endswith(": attempts start now")
    assert fake.created_total == 0  # waiting creates nothing


def test_nodes_that_hold_the_image_start_the_run_at_once(
    fake: FakeKubernetes, tmp_path: Path
) -> None:
    fake.policy.nodes = [node(NODE, images=[IMAGE]), node("node-2", images=[IMAGE])]
    lines: list[Check] = []
    make_backend(fake, tmp_path, image_poll=0.1).wait_ready(REQUEST, lines.append)
    assert [c.line() for c in lines] == [
        f"ok   sandbox.prepull: {IMAGE} is on every schedulable node (2): attempts start now"
    ]
    assert fake.calls["list nodes"] == 1


def test_the_wait_is_bounded_and_names_the_nodes_without_the_image(
    fake: FakeKubernetes, tmp_path: Path
) -> None:
    fake.policy.nodes = [node(NODE, images=[IMAGE]), node("node-2"), node("node-3")]
    backend = make_backend(fake, tmp_path, image_wait=0.5, image_poll=0.1)
    with pytest.raises(SandboxError) as caught:
        backend.wait_ready(REQUEST, lambda c: None)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"sandbox image {IMAGE} is still missing on 2 of 3 schedulable nodes (node-2, node-3) "
        "after "
    )
    assert "k8s/base/prepull-daemonset.yaml" in message and "image_wait: 0" in message


def test_image_wait_zero_does_not_read_the_nodes(fake: FakeKubernetes, tmp_path: Path) -> None:
    fake.policy.nodes = [node(NODE), node("node-2")]
    lines: list[Check] = []
    make_backend(fake, tmp_path, image_wait=0).wait_ready(REQUEST, lines.append)
    assert [c.key for c in lines] == ["sandbox.prepull"] and lines[0].ok
    assert fake.calls["list nodes"] == 0


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_run_whose_nodes_never_get_the_image_stops_with_one_line_and_exit_1(
    fake: FakeKubernetes, tmp_path: Path
) -> None:
    """Guards the CLI convention: infrastructure that never got ready, nothing recorded."""
    release = write_tiny_release(tmp_path / "release", tasks=1)
    fake.policy.nodes = [node(NODE, images=[IMAGE]), node("node-2")]
    store = tmp_path / "store"
    spec = {
        "run_id": "r1",
        "release": str(release),
        "store": str(store),
        "agents": [{"name": "gold", "harness": "gold"}],
        "limits": {"wall_seconds": 120, "command_timeout": 30},
        "sandbox": {
            "backend": "kubernetes",
            "image": IMAGE,
            "cpus": 1,
            "memory": "1GiB",
            "options": {
                "api_host": fake.url,
                "namespace": NAMESPACE,
                "slots": "thread",
                "api_backoff_base": 0.02,
                "workspace_cache_dir": str(tmp_path / "cache"),
                "path": f"{sys.prefix}/bin:{BASE_PATH}",
                "image_wait": 1,
                "image_poll": 0.2,
            },
        },
        "concurrency": 1,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    p = dataspace("run", str(path), env=cli_env())
    assert p.returncode == 1, p.stdout + p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [
        next(ln for ln in p.stderr.splitlines() if ln.startswith("error: run r1: sandbox image"))
    ]
    assert "still missing on 1 of 2 schedulable nodes (node-2) after" in errors[0]
    assert (
        f"preflight warn sandbox.prepull: waiting for 1 of 2 schedulable nodes to hold {IMAGE}"
        in p.stdout
    )
    assert (
        "preflight ok   sandbox.staging: streamed through the API server, once per attempt (no "
        f"claim of {NAMESPACE} is labelled dataspace.io/workspace-cache=true;" in p.stdout
    )
    assert fake.created_total == 0  # no attempt's pod (the image was on a node: no one-off)
    assert not (store / "runs" / "r1" / "spec.json").exists()  # nothing recorded
