"""Native harnesses on the kubernetes backend, on the loopback fake cluster with its network.

The fake plays the cluster network as ``k8s/base`` declares it: its CNI enforces the
NetworkPolicies of ``networkpolicies.yaml`` and ``harness-relay.yaml`` (read from the
files), so a sandbox pod labelled ``dataspace.io/native-harness`` reaches the controller's
relay ports and nothing else, and any other sandbox pod reaches nothing. The controller
side (this process) holds the key; the pod gets a one-attempt token. The real Codex and
Claude Code binaries come from the pod's image (``/opt/dataspace/harnesses``, which the
fake's image carries from this host's install, as ``images/Dockerfile.runtime`` does).
"""

from __future__ import annotations

import base64
import json
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip(
    "kubernetes",
    reason="the kubernetes backend needs the kubernetes client (pip install kubernetes)",
)
from k8s_support import IMAGE_BINDS, make_backend

from dataspace.agents.native.install import PINS, harness_root, harness_state
from dataspace.sandbox.base import Limits, SandboxSpec
from dataspace.sandbox.kubernetes import RELAY_PORTS, KubernetesOptions
from dataspace.testing.fake_k8s import (
    RUNTIME_MANIFEST,
    FakeKubernetes,
    PodNetwork,
    chroot_runtime_available,
)

pytestmark = [pytest.mark.integration]

K8S = Path(__file__).resolve().parents[2] / "k8s"
SANDBOX_NS = "dataspace-sandboxes"
CONTROLLER_IP = "10.244.0.1"
KEY_ENV = "DATASPACE_TEST_MODEL_KEY"
SECRET = "sk-k8s-test-5d1e9a3c7b20f84e6a11"  # a stand-in key that must never reach a pod
HALF = len(SECRET) // 2


def policies() -> tuple[dict[str, Any], ...]:
    docs = []
    for name in ("networkpolicies.yaml", "harness-relay.yaml"):
        docs += [d for d in yaml.safe_load_all((K8S / "base" / name).read_text()) if d]
    return tuple(d for d in docs if d["kind"] == "NetworkPolicy")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FakeKubernetes]:
    if not chroot_runtime_available():
        pytest.skip("the fake cluster's network needs root, unshare and nsenter")
    image = tmp_path / "image-opt-dataspace"
    (image / "harnesses").mkdir(parents=True)
    (image / "runtime-manifest.json").write_text(json.dumps(RUNTIME_MANIFEST))
    folders = {"/opt/dataspace": image}
    if harness_root().is_dir():  # the runtime image's own install of the harnesses
        folders["/opt/dataspace/harnesses"] = harness_root()
    net = PodNetwork(policies=policies(), controller_address=CONTROLLER_IP)
    with FakeKubernetes(image_binds=IMAGE_BINDS, image_folders=folders, network=net) as fake:
        yield fake
        assert fake.pod_names() == [], "pods leaked"


def _options(fake: FakeKubernetes, tmp_path: Path) -> dict[str, Any]:
    return {
        "api_host": fake.url,
        "namespace": SANDBOX_NS,
        "ready_timeout": 30.0,
        "slots": "thread",
        "api_backoff_base": 0.02,
        "workspace_cache_dir": str(tmp_path / "ws-cache"),
        "path": f"{sys.prefix}/bin:/usr/local/bin:/usr/bin:/bin",
        "relay_address": CONTROLLER_IP,
        "relay_bind": "127.0.0.1",
    }


def test_the_relay_port_range_is_the_one_the_policies_open() -> None:
    """Guards the one range shared by the backend's default and the two manifests."""
    net = PodNetwork(policies=policies())
    opened = net.allowed_ports(SANDBOX_NS, {"dataspace.io/native-harness": "true"})
    ports = KubernetesOptions().relay_ports
    assert ports == RELAY_PORTS and opened == set(ports) and len(ports) >= 16
    assert net.allowed_ports(SANDBOX_NS, {}) == set()  # every other sandbox: nothing
    # the ports are outside Ray's worker ports and the kernel's ephemeral ports
    assert min(ports) > 19999 and max(ports) < 32768
    # every controller pod knows the IP the sandbox pods dial (relay_address's default)
    ray = yaml.safe_load((K8S / "base" / "raycluster.yaml").read_text())
    groups = [ray["spec"]["headGroupSpec"], *ray["spec"]["workerGroupSpecs"]]
    for group in groups:
        for c in group["template"]["spec"]["containers"]:
            env = {e["name"]: e for e in c.get("env") or []}
            assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def test_a_cni_that_ignores_end_port_still_opens_every_relay_port() -> None:
    """Guards the policies' port list: with a range and ``endPort`` such a CNI opened the
    first relay port alone, and every relay but one was unreachable."""
    net = PodNetwork(policies=policies(), end_port=False)
    opened = net.allowed_ports(SANDBOX_NS, {"dataspace.io/native-harness": "true"})
    assert opened == set(RELAY_PORTS)
    for doc in policies():
        for rule in [*doc["spec"].get("egress", []), *doc["spec"].get("ingress", [])]:
            assert all("endPort" not in p for p in rule.get("ports") or [])
    assert KubernetesOptions.from_options({"relay_ports": "20100-20103"}).relay_ports == (
        20100,
        20101,
        20102,
        20103,
    )


class _Listener:
    """A TCP listener on the host's 127.0.0.1 that counts what it accepts."""

    def __init__(self, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._t.join(timeout=5)
        self.sock.close()


_CLIENT = textwrap.dedent(
    """
    import json, socket, sys, urllib.error, urllib.request
    relay, host_port, other_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    token, model = sys.argv[4], sys.argv[5]
    out = {}
    def post(name, headers, body):
        req = urllib.request.Request(relay + "/v1/responses", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", **headers})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                out[name] = [r.status, r.read().decode()]
        except urllib.error.HTTPError as e:
            out[name] = [e.code, e.read().decode()[:400]]
        except OSError as e:
            out[name] = ["error", str(e)]
    ask = {"model": model, "input": "hello", "stream": False}
    post("no_token", {}, ask)
    post("wrong_token", {"Authorization": "Bearer " + token[::-1]}, ask)
    post("wrong_model", {"Authorization": "Bearer " + token}, {**ask, "model": "other"})
    post("token", {"Authorization": "Bearer " + token}, ask)
    def reach(name, addr):
        s = socket.socket(); s.settimeout(5)
        try:
            s.connect(addr); out[name] = "open"
        except OSError as e:
            out[name] = type(e).__name__
    reach("host_loopback", ("127.0.0.1", host_port))
    reach("controller_other_port", (relay.split("//")[1].split(":")[0], other_port))
    reach("elsewhere", ("10.244.9.9", 443))
    print(json.dumps(out))
    """
)


def test_a_native_pod_reaches_its_relay_alone_and_only_with_the_token(
    cluster: FakeKubernetes, tmp_path: Path, workspace: Path
) -> None:
    from dataspace.llm.models import ModelSpec
    from dataspace.llm.wire_relay import WireRelay
    from dataspace.testing.scripted_wire import ScriptedResponsesServer

    backend = make_backend(cluster, tmp_path, **_options(cluster, tmp_path))
    host = _Listener()
    # a controller port outside the relay range (as Ray's would be): not reachable
    other = _Listener()
    model = ModelSpec(id="backbone-model", base_url="", key_env=KEY_ENV)
    try:
        with ScriptedResponsesServer({"hello": [{"content": "hi there"}]}) as srv:
            relay = WireRelay(
                wire="responses",
                model=model,
                upstream_base=srv.url + "/v1",
                api_key=SECRET,
            )
            spec = SandboxSpec(
                workspace=workspace,
                limits=Limits(cpus=1, wall_seconds=120, command_timeout=60),
                labels={"run": "net", "task": "task_1", "attempt": "1"},
                relay_network=True,
            )
            with (
                relay,
                backend.create(spec) as sb,
                backend.create(
                    SandboxSpec(workspace=workspace, limits=spec.limits, labels={"run": "plain"})
                ) as plain,
            ):
                info = sb.info()
                assert info["relay"] == {
                    "bind": "127.0.0.1",
                    "address": CONTROLLER_IP,
                    "ports": list(RELAY_PORTS),
                }
                pod = cluster.pod(SANDBOX_NS, info["pod"])
                assert pod is not None
                assert pod["metadata"]["labels"]["dataspace.io/native-harness"] == "true"
                assert "relay" not in plain.info()
                port = RELAY_PORTS[0]
                relay.serve_tcp("127.0.0.1", port)
                url = f"http://{CONTROLLER_IP}:{port}"
                sb.write_file("client.py", _CLIENT.encode())
                argv = ["python3", "client.py", url, str(host.port), str(other.port)]
                res = sb.exec([*argv, relay.token, model.id], timeout=90)
                assert res.exit_code == 0, res.stderr
                seen = json.loads(res.stdout)
                # a pod without the label reaches nothing, the relay included
                res2 = plain.exec(["python3", "-c", _reach_script(CONTROLLER_IP, port)], timeout=60)
                assert res2.stdout.strip() == "refused", res2.stderr
                key = sb.exec(_key_search(), timeout=60)
                assert key.stdout.strip() == "0", key.stderr
        assert seen["no_token"][0] == 401 and seen["wrong_token"][0] == 401
        assert "relay token" in seen["no_token"][1]
        assert seen["wrong_model"][0] == 400 and relay.refused_models == ["other"]
        assert seen["token"][0] == 200 and "response.completed" in seen["token"][1]
        # only the authorized call reached the model, with the real key added host-side
        assert len(srv.requests) == 1 and relay.calls == 1
        auth = {k.lower(): v for k, v in srv.requests[0].headers.items()}["authorization"]
        assert auth == f"Bearer {SECRET}"
        assert seen["host_loopback"] != "open" and seen["controller_other_port"] != "open"
        assert seen["elsewhere"] != "open"
        assert host.accepted == 0 and other.accepted == 0
    finally:
        host.close()
        other.close()


def _reach_script(ip: str, port: int) -> str:
    return (
        "import socket\ns = socket.socket(); s.settimeout(5)\n"
        f"try:\n    s.connect(('{ip}', {port})); print('open')\n"
        "except OSError:\n    print('refused')\n"
    )


def _key_search() -> list[str]:
    """Count the key's appearances in every environment and file the pod can see."""
    script = (
        f"A='{SECRET[:HALF]}'; B='{SECRET[HALF:]}'; k=\"$A$B\"; "
        "n1=$( (env; cat /proc/[0-9]*/environ | tr '\\0' '\\n') 2>/dev/null | grep -cF \"$k\"); "
        'n2=$(grep -rlF "$k" /output /tmp /workspace /opt/dataspace 2>/dev/null | wc -l); '
        "echo $((n1 + n2))"
    )
    return ["/bin/sh", "-c", script]


# ---- the real CLIs, through run_attempt ------------------------------------------------------


def _probe(port: int) -> str:
    return (
        f"A='{SECRET[:HALF]}'; B='{SECRET[HALF:]}'; k=\"$A$B\"; "
        "n1=$( (env; cat /proc/[0-9]*/environ | tr '\\0' '\\n') 2>/dev/null | grep -cF \"$k\"); "
        'n2=$(grep -rlF "$k" /output /tmp /workspace 2>/dev/null | wc -l); '
        'net=$(python3 -c "import socket; s=socket.socket(); s.settimeout(5)\n'
        "try:\n    s.connect(('127.0.0.1', " + str(port) + "))\n    print('open')\n"
        "except OSError:\n    print('refused')\"); "
        "ws=$( (echo x > /workspace/probe) 2>/dev/null && echo writable || echo readonly); "
        'echo "PROBE key_hits=$((n1 + n2)) host_net=$net workspace=$ws"'
    )


@pytest.mark.slow
@pytest.mark.llm
@pytest.mark.parametrize("harness", ["codex", "claude-code"])
def test_a_real_cli_solves_a_task_in_a_pod(
    harness: str, cluster: FakeKubernetes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataspace.release import Release
    from dataspace.runs.attempt import AttemptRequest, run_attempt
    from dataspace.runs.spec import parse_spec
    from dataspace.testing.releases import write_tiny_release
    from dataspace.testing.scripted_wire import ScriptedMessagesServer, ScriptedResponsesServer

    state = harness_state(harness)
    if not state.ready:
        pytest.skip(f"{harness} {state.pinned} is not installed ({state.problem}); {state.fix}")
    monkeypatch.setenv(KEY_ENV, SECRET)
    release = write_tiny_release(tmp_path / "release", tasks=1)
    gold = Release(release).gold_path("task_1").read_bytes()
    host = _Listener()
    encoded = base64.b64encode(gold).decode()
    script = [
        {"shell": _probe(host.port)},
        {"shell": f"echo {encoded} | base64 -d > /output/prediction.csv && head -3 prediction.csv"},
        {"content": "prediction.csv is written."},
    ]
    server = {"codex": ScriptedResponsesServer, "claude-code": ScriptedMessagesServer}[harness]
    store = tmp_path / "store"
    try:
        with server({"task_1": script}) as srv:
            spec = parse_spec(
                {
                    "run_id": f"k8s-{harness}",
                    "release": str(release),
                    "store": str(store),
                    "agents": [
                        {
                            "name": harness,
                            "harness": harness,
                            "model": {
                                "id": "backbone-model",
                                "base_url": srv.url,
                                "key_env": KEY_ENV,
                                "prices": {"input": 2.0, "cached_input": 0.5, "output": 8.0},
                            },
                        }
                    ],
                    "limits": {"wall_seconds": 240, "command_timeout": 240},
                    "sandbox": {
                        "backend": "kubernetes",
                        "cpus": 2,
                        "memory": "4GiB",
                        "pids": 512,
                        "options": _options(cluster, tmp_path),
                    },
                },
                source="test",
            )
            row = run_attempt(
                AttemptRequest(
                    run_id=spec.run_id,
                    store_uri=spec.store,
                    release_root=spec.release,
                    agent=spec.agents[0],
                    task_id="task_1",
                    attempt=1,
                    key="k1",
                    limits=spec.limits,
                    sandbox=spec.sandbox,
                    submitted_at=time.time(),
                )
            )
    finally:
        host.close()
    assert (row["status"], row["passed"]) == ("submitted", True), row
    assert row["sandbox_enforcement"] == "kubernetes"
    rep = srv.totals("task_1")
    assert (row["input_tokens"], row["cached_input_tokens"], row["output_tokens"]) == (
        rep.prompt_tokens,
        rep.cached_tokens,
        rep.completion_tokens,
    )
    assert row["model_calls"] == 3
    adir = store / "runs" / spec.run_id / "attempts" / harness / "task_1" / "1"
    trace = (adir / "events.jsonl").read_text()
    run = (adir / "run.json").read_text()
    assert SECRET not in trace and SECRET not in run
    assert "PROBE key_hits=0 host_net=refused workspace=readonly" in trace
    assert host.accepted == 0
    events = [json.loads(line) for line in trace.splitlines()]
    start = next(e for e in events if e["type"] == "agent_start")
    assert start["version"] == PINS[harness].version
    cfg = start["harness_config"]
    assert cfg["harness_from"] == "sandbox image"
    assert cfg["relay_path"] == f"tcp to {CONTROLLER_IP}, ports {RELAY_PORTS[0]}-{RELAY_PORTS[-1]}"
    sandbox = json.loads(run)["sandbox"]
    assert sandbox["labels"]["native-harness"] == "true" and sandbox["relay"]["address"]
    for req in srv.requests:  # every call reached the endpoint with the real key, host-side
        low = {k.lower(): v for k, v in req.headers.items()}
        assert SECRET in low.get("authorization", "") + low.get("x-api-key", "")


def test_a_pod_whose_image_lacks_the_harness_ends_with_the_fix(
    tmp_path: Path, workspace: Path
) -> None:
    """Guards the in-pod install check: the CLI comes from the image, never from the host."""
    from dataspace.agents import AgentContext, AgentLimits, get_agent
    from dataspace.llm.models import ModelSpec
    from dataspace.release import TaskInput
    from dataspace.traces import EventLog

    if not chroot_runtime_available():
        pytest.skip("the fake cluster's network needs root, unshare and nsenter")
    image = tmp_path / "bare-image"
    image.mkdir()
    (image / "runtime-manifest.json").write_text(json.dumps(RUNTIME_MANIFEST))
    net = PodNetwork(policies=policies(), controller_address=CONTROLLER_IP)
    with FakeKubernetes(
        image_binds=IMAGE_BINDS, image_folders={"/opt/dataspace": image}, network=net
    ) as fake:
        backend = make_backend(fake, tmp_path, **_options(fake, tmp_path))
        spec = SandboxSpec(
            workspace=workspace,
            limits=Limits(cpus=1, wall_seconds=60, command_timeout=30),
            relay_network=True,
        )
        with backend.create(spec) as sb:
            events = EventLog(tmp_path / "events.jsonl")
            ctx = AgentContext(
                task=TaskInput(task_id="task_1", question="q?"),
                sandbox=sb,
                limits=AgentLimits(wall_seconds=60),
                events=events,
                deadline=time.monotonic() + 60,
                settings={
                    "model": ModelSpec(id="m", base_url="http://127.0.0.1:9", key_env=KEY_ENV)
                },
            )
            result = get_agent("codex").run(ctx)
            events.close()
    assert result.end_state == "runtime_error"
    assert result.error is not None
    assert "/opt/dataspace/harnesses/codex/bin/codex is missing" in result.error
    assert "images/Dockerfile.runtime" in result.error


@pytest.mark.slow
@pytest.mark.llm
def test_past_the_deadline_in_a_pod_nothing_is_left_but_the_pod(
    cluster: FakeKubernetes, tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards the pod's sweep: what the CLI left (a ``setsid`` daemon too) dies at the
    deadline, while the pod's own init and exec helper (the same user) live on."""
    from dataspace.agents import AgentContext, AgentLimits, get_agent
    from dataspace.llm.models import ModelSpec
    from dataspace.release import TaskInput
    from dataspace.testing.scripted_wire import ScriptedResponsesServer
    from dataspace.traces import EventLog

    state = harness_state("codex")
    if not state.ready:
        pytest.skip(f"codex {state.pinned} is not installed ({state.problem}); {state.fix}")
    monkeypatch.setenv(KEY_ENV, SECRET)
    backend = make_backend(cluster, tmp_path, **_options(cluster, tmp_path))
    daemon = "setsid nohup sleep 997 > /dev/null 2>&1 < /dev/null & echo started"
    spec = SandboxSpec(
        workspace=workspace,
        limits=Limits(cpus=2, memory_bytes=4 * 1024**3, pids=512, wall_seconds=300),
        relay_network=True,
    )
    with (
        ScriptedResponsesServer(
            {"task_1": [{"shell": daemon}, {"content": "thinking", "delay": 120}]}
        ) as srv,
        backend.create(spec) as sb,
    ):
        events = EventLog(tmp_path / "events.jsonl")
        ctx = AgentContext(
            task=TaskInput(task_id="task_1", question="Which rows?"),
            sandbox=sb,
            limits=AgentLimits(wall_seconds=25),
            events=events,
            deadline=time.monotonic() + 25,
            settings={
                "model": ModelSpec(id="backbone-model", base_url=srv.url, key_env=KEY_ENV),
                "grace_seconds": 2,
            },
        )
        result = get_agent("codex").run(ctx)
        events.close()
        left = sb.exec(["/bin/sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], timeout=30)
    assert result.end_state == "wall_time_exhausted", result.error
    assert left.exit_code == 0  # the pod still answers
    assert "sleep 997" not in left.stdout and "codex" not in left.stdout, left.stdout
    assert srv.requests  # the CLI ran, and reached the model through the pod's relay path
