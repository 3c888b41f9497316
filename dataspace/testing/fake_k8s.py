"""A loopback fake of the few Kubernetes API calls the sandbox controller makes.

``FakeKubernetes`` is an HTTP server on 127.0.0.1 that speaks exactly what the
``kubernetes`` sandbox backend uses, through the real ``kubernetes`` client:

* ``POST   /api/v1/namespaces/{ns}/pods``                 create
* ``GET    /api/v1/namespaces/{ns}/pods/{name}``          read
* ``GET    /api/v1/namespaces/{ns}/pods?labelSelector=``  list (paginated) and ``watch=true``
* ``DELETE /api/v1/namespaces/{ns}/pods/{name}``          delete
* ``GET    /api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name=``  events
* ``GET    /api/v1/namespaces/{ns}/pods/{name}/exec``     exec (websocket, channel
  protocols v5 and v4)

Behind the API sits a small kubelet: containers run their real commands on this host, and
exec runs real processes with the pod's volumes at the paths the pod spec mounts them.
As root (and with ``unshare``), each container process gets its own mount and network
namespace with a private root made of read-only bind mounts of the host's system folders
plus the pod's volumes (read-only where the spec says so), and runs as the pod's user;
elsewhere processes run directly on the host with ``DS_SANDBOX_ROOT`` pointing at the
pod's folder (enough for the helper, not for commands that name absolute paths).

With ``network`` (a ``PodNetwork``, chroot runtime only) the fake also plays the cluster
network and its CNI: each main container gets ``lo`` and an ``eth0`` on a small network of
its own, where the controller answers at ``PodNetwork.controller_address`` on exactly the
ports the given NetworkPolicies allow that pod to reach it (egress of the pod's namespace
and ingress of the controller's, both enforced); each such port is forwarded to the same
port on the host's 127.0.0.1, where the test's controller side listens. Nothing else
answers there and there is no route anywhere else.

The kubelet behaves as a real one where the backend depends on it: it kills a pod's
containers first (SIGTERM to PID 1, or SIGKILL for an OOM; execs end with 137) and writes
the end into the pod's status ``status_delay`` seconds later, the containers' end before
the phase; it evicts pods whose emptyDirs or ephemeral storage exceed their limits (measured
every ``eviction_interval``), schedules by requests on one node (``node_allocatable``),
lists the images of the pods it ran in its node's status (``node_gets_image`` scripts a pull
ending on any node), serves claims with their labels and annotations (``add_claim``),
counts every exec's bytes (``exec_log``), leaves pods with missing claims Pending and, with
``user_namespaces=False``, pods with ``hostUsers: false`` ContainerCreating (Warning events only), gives containers memory
cgroups of their limits (as root), and injects ``KUBERNETES_SERVICE_HOST`` and its siblings
into every container (docs/cluster.md, "What the loopback fake models").

Scripted behaviours (``Behaviour``) reproduce the rest of what clusters do to pods: image
pull failure, Pending for ever (unschedulable), OOM kill of the whole container or
node-pressure eviction while the n-th exec runs, activeDeadlineSeconds; ``fail_next`` makes
the API answer 5xx or 409 (optionally after doing the work, a lost answer).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import logging
import os
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dataspace.testing.fake_k8s_policy import NODE, NODE_ALLOCATABLE, ApiPolicy, node, status
from dataspace.testing.scripted_server import LoopbackHTTPServer

logger = logging.getLogger(__name__)

RUNTIME_MANIFEST: dict[str, Any] = {
    "runtime": "Data Workbench Runtime",
    "runtime_version": "1.0",
    "tools_sha256": hashlib.sha256(b"fake TOOLS.md").hexdigest(),
    "capabilities_sha256": hashlib.sha256(b"fake capabilities.json").hexdigest(),
    "python": "3.11.11",
    "python_packages": {"pandas": "2.2.3"},
    "system_packages": {"sqlite3": "3.40.1-2"},
    "python_packages_sha256": hashlib.sha256(b"pandas==2.2.3\n").hexdigest(),
    "system_packages_sha256": hashlib.sha256(b"sqlite3\t3.40.1-2\n").hexdigest(),
}
"""The runtime manifest the fake's images hold by default (the shape of the real one)."""
_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
KUBELET_ENV = {
    "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBERNETES_SERVICE_PORT_HTTPS": "443",
    "KUBERNETES_PORT": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
    "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
    "KUBERNETES_PORT_443_TCP_PORT": "443",
    "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
}
"""What the kubelet adds to every container's environment: the API server's service,
even with ``enableServiceLinks: false``."""


@dataclass(frozen=True, kw_only=True)
class Behaviour:
    """What happens to the pods created while this behaviour is set.

    Attributes:
        start_delay: seconds a pod stays Pending before its containers start.
        outcome: ``run`` (normal), ``image_pull`` (ErrImagePull, then ImagePullBackOff),
            ``unschedulable`` (Pending for ever), ``oom`` or ``evict`` (the container is
            OOM-killed / the pod evicted for node pressure while exec number
            ``on_exec`` runs), ``deadline`` (DeadlineExceeded ``after`` seconds into exec
            ``on_exec``),
            ``storage`` (evicted for exceeding its emptyDir limit while exec ``on_exec``
            runs).
        on_exec: which exec into the main container triggers ``oom``, ``evict``,
            ``storage`` or ``deadline`` (1-based; the backend's own first exec reads the
            runtime manifest).
        after: seconds from the start of that exec to ``deadline``.
    """

    start_delay: float = 0.05
    outcome: str = "run"
    on_exec: int = 1
    after: float = 0.5


@dataclass(frozen=True, kw_only=True)
class PodNetwork:
    """The cluster network as the fake's pods see it, with NetworkPolicies enforced.

    Attributes:
        policies: NetworkPolicy objects (e.g. the documents of ``k8s/base/*.yaml``).
        controller_address: the controller pod's IP as the sandbox pods dial it.
        controller_namespace: the controller pod's namespace.
        controller_labels: the controller pod's labels.
        controller_host: where the controller's listeners are on this host.
        end_port: the CNI honours ``endPort``; False: a CNI that ignores it (a rule with
            a port range opens its first port alone, as such CNIs do).
    """

    policies: tuple[Mapping[str, Any], ...]
    controller_address: str = "10.244.0.1"
    controller_namespace: str = "dataspace"
    controller_labels: Mapping[str, str] = field(
        default_factory=lambda: {"app.kubernetes.io/component": "controller"}
    )
    controller_host: str = "127.0.0.1"
    end_port: bool = True

    def allowed_ports(self, namespace: str, labels: Mapping[str, str]) -> set[int]:
        """TCP ports of the controller a pod may connect to.

        Its namespace's egress rules and the controller namespace's ingress rules, both
        as NetworkPolicies combine.

        A pod no egress policy selects gets nothing: the fake models allowances only.
        """
        egress = self._rules("Egress", namespace, labels) or []
        peer_ns, peer = self.controller_namespace, dict(self.controller_labels)
        out: set[int] = set()
        for rule in egress:
            if _peer_matches(rule.get("to"), namespace, peer_ns, peer, self.controller_address):
                out |= _rule_ports(rule, self.end_port)
        ingress = self._rules("Ingress", peer_ns, peer)
        if ingress is not None:
            inbound: set[int] = set()
            for rule in ingress:
                if _peer_matches(rule.get("from"), peer_ns, namespace, labels, None):
                    inbound |= _rule_ports(rule, self.end_port)
            out &= inbound
        return out

    def _rules(
        self, kind: str, namespace: str, labels: Mapping[str, str]
    ) -> list[Mapping[str, Any]] | None:
        """The rules of ``kind`` that apply to a pod; None when no policy isolates it."""
        rules: list[Mapping[str, Any]] | None = None
        key = kind.lower()
        for pol in self.policies:
            if pol.get("kind") != "NetworkPolicy":
                continue
            if (pol.get("metadata") or {}).get("namespace") != namespace:
                continue
            spec = pol.get("spec") or {}
            types = spec.get("policyTypes") or (
                ["Ingress", "Egress"] if "egress" in spec else ["Ingress"]
            )
            if kind not in types or not _selects(spec.get("podSelector") or {}, labels):
                continue
            rules = [*(rules or []), *(spec.get(key) or [])]
        return rules


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if selector.get("matchExpressions"):
        raise ValueError("fake CNI: matchExpressions are not supported")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(
    peers: Any,
    policy_ns: str,
    namespace: str,
    labels: Mapping[str, str],
    address: str | None,
) -> bool:
    """Whether a rule's ``to``/``from`` list selects the pod (``namespace``, ``labels``)."""
    import ipaddress

    if peers is None:
        return True
    for peer in peers:
        if "ipBlock" in peer:
            if address is None:
                continue
            ip = ipaddress.ip_address(address)
            block = peer["ipBlock"]
            if ip in ipaddress.ip_network(block["cidr"]) and not any(
                ip in ipaddress.ip_network(x) for x in block.get("except") or []
            ):
                return True
            continue
        ns_sel, pod_sel = peer.get("namespaceSelector"), peer.get("podSelector")
        # without a namespaceSelector, a podSelector means the policy's own namespace
        ns_ok = (
            _selects(ns_sel, {"kubernetes.io/metadata.name": namespace})
            if ns_sel is not None
            else namespace == policy_ns
        )
        if ns_ok and (pod_sel is None or _selects(pod_sel, labels)):
            return True
    return False


def _rule_ports(rule: Mapping[str, Any], end_port: bool = True) -> set[int]:
    ports = rule.get("ports")
    if not ports:
        raise ValueError("fake CNI: a rule without ports (every port) is not supported")
    out: set[int] = set()
    for p in ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        if not isinstance(p.get("port"), int):
            raise ValueError(f"fake CNI: named or missing port in {p}")
        last = int(p.get("endPort", p["port"])) if end_port else p["port"]
        out |= set(range(p["port"], last + 1))
    return out


@dataclass
class _Fault:
    method: str
    contains: str
    status: int
    count: int
    after_effect: bool


@dataclass
class _Outage:
    """An API outage in progress (see ``FakeKubernetes.outage``)."""

    handler: type[BaseHTTPRequestHandler] | None = None
    unavailable_until: float = 0.0
    over: threading.Event = field(default_factory=threading.Event)
    conns: set[socket.socket] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def cut(self) -> None:
        """Cut every open client connection (a restarted server holds none)."""
        with self.lock:
            conns = list(self.conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def _api_target(
    method: str, parts: list[str], query: dict[str, list[str]]
) -> tuple[list[str], str, str | None, str | None] | None:
    """(RBAC verbs, resource, namespace, name) of a request; None: not an API path."""
    if parts[:2] != ["api", "v1"] or len(parts) < 3:
        return None
    if parts[2] == "nodes":
        name = parts[3] if len(parts) > 3 else None
        return ["list" if name is None else "get"], "nodes", None, name
    if parts[2] != "namespaces" or len(parts) < 4:
        return None
    if len(parts) == 4:
        return ["get"], "namespaces", parts[3], parts[3]
    ns, resource = parts[3], parts[4]
    name = parts[5] if len(parts) > 5 else None
    sub = parts[6] if len(parts) > 6 else None
    if sub == "exec":
        return ["get", "create"], f"{resource}/exec", ns, name
    watch = (query.get("watch") or ["false"])[0].lower() in ("true", "1")
    verb = {"POST": "create", "DELETE": "delete"}.get(method) or (
        "watch" if watch else "get" if name else "list"
    )
    return [verb], resource, ns, name


@dataclass
class _Pod:
    obj: dict[str, Any]
    behaviour: Behaviour
    root: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    ns_pids: dict[str, int] = field(default_factory=dict)
    execs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    main_execs: int = 0
    sockets: list[socket.socket] = field(default_factory=list)
    started_at: float | None = None
    net_holder: subprocess.Popen[bytes] | None = None
    listeners: list[socket.socket] = field(default_factory=list)
    ending: bool = False
    empty_dirs: dict[str, Path] = field(default_factory=dict)


class FakeKubernetes:
    """The fake API server and kubelet; use as a context manager.

    Args:
        runtime: ``chroot`` (root only), ``host`` or ``auto`` (chroot when possible).
        claims: PersistentVolumeClaim name -> host folder, for pods that mount claims
            (in any namespace); the folder is shared between the test's controller side
            and the pods, as a ReadWriteMany volume or a node's ``hostPath`` would be.
            ``add_claim`` also gives a claim labels and annotations.
        page_size: the largest page the list endpoint returns (to exercise pagination).
        image_binds: host folders every container also sees, read-only, at the same path
            (standing in for what an image ships, e.g. a Python environment).
        image_folders: container path -> host folder, read-only in every container
            (standing in for the image's own files). None: ``/opt/dataspace`` holding
            :data:`RUNTIME_MANIFEST` as ``runtime-manifest.json``, as the runtime image
            does; ``{}``: an image without a runtime manifest.
        network: the cluster network and NetworkPolicies (see ``PodNetwork``); None: pods
            have no network at all.
        status_delay: seconds from the kubelet killing a pod's containers (deadline,
            eviction, OOM) to the pod's status saying so, as the kubelet's status
            manager reports about a second later (an attribute: tests may lower it).
        node_allocatable: ``cpu`` and ``memory`` of the one node; pods whose requests do
            not fit beside the pods already on it stay Pending (``FailedScheduling``).
        user_namespaces: whether the runtime supports ``hostUsers: false``; without, such
            pods stay ContainerCreating with ``FailedCreatePodSandBox`` Warnings.
        eviction_interval: seconds between the eviction manager's checks of a pod's local
            storage (a kubelet's housekeeping runs every 10 s; an attribute).
    """

    def __init__(
        self,
        *,
        runtime: str = "auto",
        claims: dict[str, Path] | None = None,
        page_size: int = 100,
        image_binds: tuple[str, ...] = (),
        image_folders: dict[str, Path] | None = None,
        network: PodNetwork | None = None,
        status_delay: float = 1.0,
        node_allocatable: Mapping[str, str] | None = None,
        user_namespaces: bool = True,
        eviction_interval: float = 10.0,
    ) -> None:
        self.runtime = _pick_runtime(runtime)
        self.status_delay = status_delay
        self.node_allocatable = dict(node_allocatable or NODE_ALLOCATABLE)
        self.user_namespaces = user_namespaces
        self.eviction_interval = eviction_interval
        self._cgroup_v2, self._cgroup_base = _memory_cgroup_base(self.runtime)
        if network is not None and self.runtime != "chroot":
            raise RuntimeError("the fake's pod network needs the chroot runtime (root, unshare)")
        self.network = network
        self.claims = {k: Path(v) for k, v in (claims or {}).items()}
        self.claim_meta: dict[str, dict[str, Any]] = {}
        self.exec_log: list[dict[str, Any]] = []
        self.image_arrivals: dict[tuple[str, str], float] = {}
        self.page_size = page_size
        self.image_binds = tuple(image_binds)
        self._dir = Path(tempfile.mkdtemp(prefix="ds-fake-k8s-"))
        if image_folders is None:
            image_root = self._dir / "image-runtime"
            image_root.mkdir()
            (image_root / "runtime-manifest.json").write_text(json.dumps(RUNTIME_MANIFEST))
            image_folders = {"/opt/dataspace": image_root}
        self.image_folders = {k: Path(v) for k, v in image_folders.items()}
        self.behaviour = Behaviour()
        self.calls: Counter[str] = Counter()
        self.created_total = 0
        self.max_pending_seen = 0
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._events: list[dict[str, Any]] = []
        self._faults: list[_Fault] = []
        self._rv = 0
        self._cond = threading.Condition()
        self._closed = False
        self._server: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self.policy = ApiPolicy(
            nodes=[
                node(NODE, cpu=self.node_allocatable["cpu"], memory=self.node_allocatable["memory"])
            ]
        )
        self._api_outage = _Outage()

    # ---- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> FakeKubernetes:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start serving on 127.0.0.1 (a free port)."""
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server, self._thread = LoopbackHTTPServer.serve(Handler, name="fake-k8s")
        self._api_outage.handler = Handler
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        """Stop serving; kill every container process; remove the fake's files."""
        with self._cond:
            self._closed = True
            pods = list(self._pods.values())
            self._cond.notify_all()
        for pod in pods:
            self._kill(pod)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._cgroup_base is not None:
            _remove_cgroup_tree(self._cgroup_base)
        shutil.rmtree(self._dir, ignore_errors=True)

    # ---- scripting and inspection -------------------------------------------------------

    def fail_next(
        self, method: str, contains: str, status: int, *, count: int = 1, after_effect: bool = False
    ) -> None:
        """Answer the next matching requests with an error status.

        Args:
            method: the HTTP method (``POST``, ``GET``, ``DELETE``).
            contains: a part of the request path (``/pods``, ``/exec``).
            status: the HTTP status to answer (5xx, 409, 429).
            count: how many requests.
            after_effect: carry the request out first, then answer the error (a lost answer).
        """
        with self._cond:
            self._faults.append(_Fault(method.upper(), contains, status, count, after_effect))

    def add_claim(
        self,
        name: str,
        folder: Path,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """A bound PersistentVolumeClaim backed by ``folder``, with labels and annotations."""
        with self._cond:
            self.claims[name] = Path(folder)
            self.claim_meta[name] = {
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            }

    def node_gets_image(self, node_name: str, image: str, after: float) -> None:
        """The node lists ``image`` in its status ``after`` seconds from now (a pull ends).

        ``image_arrivals[(node_name, image)]`` is the ``time.monotonic()`` of that moment.
        """

        def arrive() -> None:
            time.sleep(after)
            self._hold_image(node_name, [image])

        threading.Thread(target=arrive, name="fake-k8s-pull", daemon=True).start()

    def _hold_image(self, node_name: str, images: list[str]) -> None:
        """Add images to a node's status, as the kubelet reports pulled images."""
        with self.policy.lock:
            for obj in self.policy.nodes:
                if obj["metadata"]["name"] != node_name:
                    continue
                held = obj["status"].setdefault("images", [])
                names = {n for entry in held for n in entry.get("names") or []}
                for image in images:
                    if image not in names:
                        held.append({"names": [image], "sizeBytes": 100 * 1024**2})
                        names.add(image)
            for image in images:
                self.image_arrivals.setdefault((node_name, image), time.monotonic())

    @property
    def memory_cgroups(self) -> bool:
        """Whether containers get memory cgroups of their limits (the kernel OOM-kills)."""
        return self._cgroup_base is not None

    def pod_names(self, namespace: str | None = None) -> list[str]:
        """Names of the pods that exist now."""
        with self._cond:
            return sorted(n for (ns, n) in self._pods if namespace in (None, ns))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of one pod object."""
        with self._cond:
            pod = self._pods.get((namespace, name))
            return copy.deepcopy(pod.obj) if pod else None

    def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Copies of the events recorded (they outlive their pods, as on a cluster)."""
        with self._cond:
            return [
                copy.deepcopy(e)
                for e in self._events
                if namespace in (None, e["metadata"]["namespace"])
            ]

    def add_event(
        self, namespace: str, name: str, reason: str, message: str, kind: str = "Normal"
    ) -> None:
        """Record an event about a pod."""
        with self._cond:
            self._add_event(namespace, name, reason, message, kind)

    # ---- the API server's refusals and outages (see fake_k8s_policy) -------------------

    def outage(self, refused: float, unavailable: float = 0.0) -> threading.Event:
        """Take the API server down, as a restart does; returns at once.

        For ``refused`` seconds nothing listens (connections are refused, open ones cut,
        watches and execs included), then for ``unavailable`` seconds every request is
        answered ``503 ServiceUnavailable`` ("the server is currently unable to handle the
        request", a server still draining or starting), then it serves again on the same
        port.

        Returns:
            An event set when the API serves again.
        """
        out = self._api_outage
        server = self._server
        if server is None or out.handler is None:
            raise RuntimeError("the fake is not serving")
        port = server.server_address[1]
        out.over.clear()
        server.shutdown()
        server.server_close()
        out.cut()

        handler = out.handler

        def back() -> None:
            time.sleep(refused)
            out.unavailable_until = time.monotonic() + unavailable
            if not self._closed:
                self._server, self._thread = LoopbackHTTPServer.serve(
                    handler, name="fake-k8s", port=port
                )
            time.sleep(unavailable)
            out.over.set()

        threading.Thread(target=back, name="fake-k8s-outage", daemon=True).start()
        return out.over

    def _api_answer(
        self,
        handler: _Handler,
        method: str,
        path: str,
        parts: list[str],
        query: dict[str, list[str]],
        body: dict[str, Any],
    ) -> bool:
        """Answer what the policy decides; False: the request goes on to the pod routes.

        That is: an outage's 503, RBAC, namespaces, admission and quota of pod creation
        (``dryRun=All`` included), ConfigMaps, claims and the cluster-scoped reads.
        """
        if time.monotonic() < self._api_outage.unavailable_until:
            handler.reply(
                503,
                status(
                    503,
                    "ServiceUnavailable",
                    "the server is currently unable to handle the request",
                ),
            )
            return True
        policy = self.policy
        target = _api_target(method, parts, query)
        if target is None:
            return False
        verbs, resource, ns, name = target
        refused = policy.authorize(verbs, resource, ns, name)
        dry_run = "All" in (query.get("dryRun") or [])
        if refused is None and parts[:3] == ["api", "v1", "nodes"] and len(parts) == 3:
            self.calls["list nodes"] += 1
            with policy.lock:
                items = copy.deepcopy(policy.nodes)
            handler.reply(
                200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}
            )
            return True
        if refused is None and len(parts) == 4 and parts[:3] == ["api", "v1", "namespaces"]:
            self.calls["get namespaces"] += 1
            if not policy.exists(parts[3]):
                handler.reply(404, status(404, "NotFound", f'namespaces "{parts[3]}" not found'))
            else:
                meta = {"name": parts[3], "labels": policy.labels(parts[3])}
                handler.reply(200, {"kind": "Namespace", "apiVersion": "v1", "metadata": meta})
            return True
        if refused is None and method == "POST" and name is None and ns is not None:
            refused = policy.missing_namespace(ns)
        if refused is not None:
            self.calls[f"{verbs[-1]} {resource}"] += 1
            handler.reply(*refused)
            return True
        if resource == "persistentvolumeclaims" and method == "GET" and ns and not name:
            self.calls["list persistentvolumeclaims"] += 1
            want = _parse_selector((query.get("labelSelector") or [""])[0])
            items = [self._claim(n, ns) for n in sorted(self.claims)]
            items = [c for c in items if all(c["metadata"]["labels"].get(k) == v
                                             for k, v in want.items())]  # fmt: skip
            handler.reply(200, {"kind": "PersistentVolumeClaimList", "apiVersion": "v1",
                                "metadata": {}, "items": items})  # fmt: skip
            return True
        if resource == "persistentvolumeclaims" and method == "GET" and name and ns:
            self.calls["get persistentvolumeclaims"] += 1
            if name in self.claims:
                handler.reply(200, self._claim(name, ns))
            else:
                handler.reply(
                    404, status(404, "NotFound", f'persistentvolumeclaims "{name}" not found')
                )
            return True
        if resource == "configmaps" and ns is not None and name is None:
            self.calls[f"{verbs[0]} configmaps"] += 1
            with policy.lock:
                if method == "POST":
                    handler.reply(*policy.create_configmap(ns, body, dry_run=dry_run))
                else:
                    items = [{"metadata": {"name": n, "namespace": ns}}
                             for n in sorted(policy.configmaps_in(ns))]  # fmt: skip
                    handler.reply(200, {"kind": "ConfigMapList", "apiVersion": "v1",
                                        "metadata": {}, "items": items})  # fmt: skip
            return True
        if resource == "pods" and method == "POST" and name is None and ns is not None:
            self.calls["create pods"] += 1
            fault = self._fault(method, path)
            if fault is not None and not fault.after_effect:
                handler.reply(
                    fault.status,
                    _status(
                        fault.status,
                        _REASONS.get(fault.status, "InternalError"),
                        "injected by the test",
                    ),
                )
                return True
            with policy.lock:  # the check and the create at once, as quota admission is
                with self._cond:
                    live = [
                        p.obj for (pns, _), p in self._pods.items()
                        if pns == ns and p.obj["status"]["phase"] in ("Pending", "Running")
                    ]  # fmt: skip
                    live = copy.deepcopy(live)
                meta = body.setdefault("metadata", {})
                if not meta.get("name"):
                    code, obj = 422, _status(422, "Invalid", "metadata.name: Required value")
                else:
                    refused = self.policy.admit_pod(ns, body, live)
                    if refused is not None:
                        code, obj = refused
                    elif dry_run:
                        code, obj = self._dry_run_pod(ns, body)
                    else:
                        code, obj = self._create(ns, body)
            if fault is not None:
                handler.reply(
                    fault.status,
                    _status(
                        fault.status,
                        _REASONS.get(fault.status, "InternalError"),
                        "answer lost (injected by the test)",
                    ),
                )
                return True
            handler.reply(code, obj)
            return True
        return False

    def _claim(self, name: str, ns: str) -> dict[str, Any]:
        meta = self.claim_meta.get(name) or {}
        return {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
            },
            "status": {"phase": "Bound"},
        }

    def _dry_run_pod(self, ns: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """What a create with ``dryRun=All`` answers: the pod as it would be, not kept."""
        with self._cond:
            if (ns, body["metadata"]["name"]) in self._pods:
                name = body["metadata"]["name"]
                return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists')
        obj = copy.deepcopy(body)
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
        obj["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
        return 201, obj

    # ---- internals: state ---------------------------------------------------------------

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _changed(self, pod: _Pod) -> None:
        """Bump the version and wake watchers (caller holds the lock)."""
        pod.obj["metadata"]["resourceVersion"] = self._next_rv()
        pending = sum(1 for p in self._pods.values() if p.obj["status"]["phase"] == "Pending")
        self.max_pending_seen = max(self.max_pending_seen, pending)
        self._cond.notify_all()

    def _add_event(
        self, ns: str, name: str, reason: str, message: str, kind: str = "Normal"
    ) -> None:
        now = _now()
        for e in self._events:
            if e["involvedObject"]["name"] == name and e["reason"] == reason:
                e["count"] += 1
                e["lastTimestamp"] = now
                return
        self._events.append(
            {
                "metadata": {"name": f"{name}.{uuid.uuid4().hex[:8]}", "namespace": ns},
                "involvedObject": {"kind": "Pod", "name": name, "namespace": ns},
                "reason": reason,
                "message": message,
                "type": kind,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
            }
        )

    def _fault(self, method: str, path: str) -> _Fault | None:
        with self._cond:
            for f in self._faults:
                if f.method == method and f.contains in path and f.count > 0:
                    f.count -= 1
                    return f
        return None

    # ---- internals: the kubelet ---------------------------------------------------------

    def _create(self, ns: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        meta = body.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            return 422, _status(422, "Invalid", "metadata.name: Required value")
        with self._cond:
            if (ns, name) in self._pods:
                return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists')
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=_now())
            body["status"] = {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Pending"}],
            }
            root = self._dir / ns / name
            pod = _Pod(obj=body, behaviour=self.behaviour, root=root)
            self._pods[(ns, name)] = pod
            self.created_total += 1
            self._changed(pod)
            result = copy.deepcopy(body)
        threading.Thread(target=self._lifecycle, args=(pod,), daemon=True).start()
        return 201, result

    def _lifecycle(self, pod: _Pod) -> None:
        b = pod.behaviour
        ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
        if not self._sleep(pod, b.start_delay):
            return
        if b.outcome != "unschedulable" and not self._schedule(pod):
            return
        with self._cond:
            if not self._alive(pod):
                return
            status = pod.obj["status"]
            if b.outcome == "unschedulable":
                msg = (
                    "0/3 nodes are available: 3 Insufficient cpu. "
                    "preemption: 0/3 nodes are available."
                )
                status["conditions"] = [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": msg,
                    }
                ]
                self._add_event(ns, name, "FailedScheduling", msg, "Warning")
                self._changed(pod)
                return
            pod.obj["spec"]["nodeName"] = NODE
            status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
            status["startTime"] = _now()
            pod.started_at = time.monotonic()
            self._add_event(ns, name, "Scheduled", f"Successfully assigned {ns}/{name} to {NODE}")
            if b.outcome == "image_pull":
                image = pod.obj["spec"]["containers"][0]["image"]
                self._add_event(ns, name, "Pulling", f'Pulling image "{image}"')
                status["containerStatuses"] = [
                    _waiting(c["name"], "ErrImagePull", image)
                    for c in pod.obj["spec"]["containers"]
                ]
                self._add_event(
                    ns, name, "Failed", f'Failed to pull image "{image}": not found', "Warning"
                )
                self._changed(pod)
        if b.outcome == "image_pull":
            if self._sleep(pod, 0.2):
                with self._cond:
                    image = pod.obj["spec"]["containers"][0]["image"]
                    pod.obj["status"]["containerStatuses"] = [
                        _waiting(c["name"], "ImagePullBackOff", image)
                        for c in pod.obj["spec"]["containers"]
                    ]
                    self._add_event(
                        ns, name, "BackOff", f'Back-off pulling image "{image}"', "Warning"
                    )
                    self._changed(pod)
            return
        if pod.obj["spec"].get("hostUsers") is False and not self.user_namespaces:
            self._sandbox_refused(
                pod, "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
            )
            return
        spec = pod.obj["spec"]
        self._hold_image(NODE, [c["image"] for c in spec.get("initContainers") or []]
                         + [c["image"] for c in spec["containers"]])  # fmt: skip
        self._deadline_timer(pod)
        for init in pod.obj["spec"].get("initContainers") or []:
            proc = self._start_container(pod, init)
            with self._cond:
                pod.obj["status"]["initContainerStatuses"] = [
                    {
                        "name": init["name"],
                        "ready": False,
                        "state": {"running": {"startedAt": _now()}},
                    }
                ]
                self._changed(pod)
            code = proc.wait()
            with self._cond:
                if not self._alive(pod):
                    return
                pod.obj["status"]["initContainerStatuses"] = [
                    {
                        "name": init["name"],
                        "ready": code == 0,
                        "state": {
                            "terminated": {
                                "exitCode": code,
                                "reason": "Completed" if code == 0 else "Error",
                            }
                        },
                    }
                ]
                if code != 0:
                    pod.obj["status"]["phase"] = "Failed"
                    self._changed(pod)
                    return
                self._changed(pod)
        for container in pod.obj["spec"]["containers"]:
            self._start_container(pod, container)
        with self._cond:
            if not self._alive(pod):
                return
            status = pod.obj["status"]
            status["phase"] = "Running"
            status["podIP"] = "10.0.0.1"
            status["conditions"] = [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "Ready", "status": "True"},
            ]
            status["containerStatuses"] = [
                {
                    "name": c["name"],
                    "ready": True,
                    "restartCount": 0,
                    "image": c["image"],
                    "state": {"running": {"startedAt": _now()}},
                }
                for c in pod.obj["spec"]["containers"]
            ]
            self._add_event(ns, name, "Started", "Started container sandbox")
            self._changed(pod)
        threading.Thread(target=self._watch_storage, args=(pod,), daemon=True).start()

    def _watch_storage(self, pod: _Pod) -> None:
        """The eviction manager's local storage checks, every ``eviction_interval`` seconds.

        An emptyDir past its ``sizeLimit``, or the pod's emptyDirs on disk past the sum of
        its containers' ``ephemeral-storage`` limits, evicts the pod with the kubelet's
        own reason and message.
        """
        spec = pod.obj["spec"]
        limits = {
            v["name"]: _quantity_bytes(str(v["emptyDir"]["sizeLimit"]))
            for v in spec.get("volumes") or []
            if "emptyDir" in v and v["emptyDir"].get("sizeLimit")
        }
        disk = {v["name"] for v in spec.get("volumes") or [] if "emptyDir" in v}
        disk -= {
            v["name"]
            for v in spec.get("volumes") or []
            if (v.get("emptyDir") or {}).get("medium") == "Memory"
        }
        total = 0
        for c in spec["containers"]:
            quantity = ((c.get("resources") or {}).get("limits") or {}).get("ephemeral-storage")
            total += _quantity_bytes(str(quantity)) if quantity else 0
        while self._sleep(pod, self.eviction_interval):
            if pod.ending:
                return
            used = {name: _disk_usage(path) for name, path in list(pod.empty_dirs.items())}
            message = ""
            for name, limit in limits.items():
                if used.get(name, 0) > limit:
                    size = next(v for v in spec["volumes"] if v["name"] == name)["emptyDir"][
                        "sizeLimit"
                    ]
                    message = f'Usage of EmptyDir volume "{name}" exceeds the limit "{size}". '
                    break
            if not message and total and sum(used.get(n, 0) for n in disk) > total:
                message = (
                    "Pod ephemeral local storage usage exceeds the total limit of containers "
                    f"{_bytes_quantity(total)}. "
                )
            if message:
                self._terminate(pod, "Evicted", message)
                return

    def _schedule(self, pod: _Pod) -> bool:
        """Bind the pod to the node once its claims exist and its requests fit.

        Until then it stays Pending with a ``FailedScheduling`` Warning, as the scheduler
        leaves it, and is tried again whenever pods change (or each second). False: the
        pod went away first.
        """
        ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
        reported, last_event = "", 0.0
        while True:
            with self._cond:
                if not self._alive(pod):
                    return False
                why = self._unschedulable(pod)
                if why is None:
                    pod.obj["spec"]["nodeName"] = NODE
                    return True
                if time.monotonic() - last_event >= 1.0:
                    self._add_event(ns, name, "FailedScheduling", why, "Warning")
                    last_event = time.monotonic()
                if why != reported:  # a pod change wakes every waiter: only real changes
                    pod.obj["status"]["conditions"] = [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": why,
                        }
                    ]
                    reported = why
                    self._changed(pod)
                self._cond.wait(1.0)

    def _unschedulable(self, pod: _Pod) -> str | None:
        """The scheduler's message when the pod cannot go on the node (caller holds the lock)."""
        spec = pod.obj["spec"]
        for vol in spec.get("volumes") or []:
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if claim is not None and claim not in self.claims:
                return (
                    f'0/1 nodes are available: persistentvolumeclaim "{claim}" not found. '
                    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for "
                    "scheduling."
                )
        used = {"cpu": 0.0, "memory": 0.0}
        for other in self._pods.values():
            phase = other.obj["status"]["phase"]
            if (
                other is not pod
                and other.obj["spec"].get("nodeName") == NODE
                and phase
                in (
                    "Pending",
                    "Running",
                )
            ):
                for key, value in _pod_requests(other.obj["spec"]).items():
                    used[key] += value
        wanted = _pod_requests(spec)
        short = [
            key
            for key in ("cpu", "memory")
            if used[key] + wanted[key] > _resource_amount(key, str(self.node_allocatable[key]))
        ]
        if not short:
            return None
        return (
            "0/1 nodes are available: "
            + ", ".join(f"1 Insufficient {key}" for key in short)
            + ". preemption: 0/1 nodes are available: 1 No preemption victims found for "
            "incoming pod."
        )

    def _sandbox_refused(self, pod: _Pod, why: str) -> None:
        """The runtime cannot create the pod's sandbox: ContainerCreating, a Warning per try."""
        ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
        with self._cond:
            if not self._alive(pod):
                return
            pod.obj["status"]["containerStatuses"] = [
                {
                    "name": c["name"],
                    "ready": False,
                    "restartCount": 0,
                    "image": c["image"],
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
                for c in pod.obj["spec"]["containers"]
            ]
            self._changed(pod)
        while True:
            with self._cond:
                if not self._alive(pod):
                    return
                self._add_event(
                    ns,
                    name,
                    "FailedCreatePodSandBox",
                    f"Failed to create pod sandbox: {why}",
                    "Warning",
                )
            if not self._sleep(pod, 1.0):
                return

    def _deadline_timer(self, pod: _Pod) -> None:
        seconds = pod.obj["spec"].get("activeDeadlineSeconds")
        if not seconds:
            return

        def fire() -> None:
            if self._sleep(pod, float(seconds)):
                self._terminate(
                    pod,
                    "DeadlineExceeded",
                    "Pod was active on the node longer than the specified deadline",
                )

        threading.Thread(target=fire, daemon=True).start()

    def _sleep(self, pod: _Pod, seconds: float) -> bool:
        """Sleep unless the pod goes away; whether it is still there."""
        end = time.monotonic() + seconds
        with self._cond:
            while self._alive(pod):
                left = end - time.monotonic()
                if left <= 0:
                    return True
                self._cond.wait(left)
        return False

    def _alive(self, pod: _Pod) -> bool:
        key = (pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"])
        return (
            not self._closed
            and self._pods.get(key) is pod
            and pod.obj["status"]["phase"] in ("Pending", "Running")
        )

    def _terminate(
        self,
        pod: _Pod,
        reason: str,
        message: str,
        *,
        container_reason: str = "",
        graceful: bool = True,
    ) -> None:
        """End a running pod as a kubelet does: kill first, report later.

        The kubelet records the Warning event and kills the containers (``graceful``:
        SIGTERM to each container's first process, SIGKILL after the pod's grace period;
        else SIGKILL, as the kernel's OOM killer does); what was exec'd in a container dies
        with it (exit 137). The pod's phase, reason and container statuses reach the API
        only ``status_delay`` seconds later.
        """
        with self._cond:
            if not self._alive(pod) or pod.ending:
                return
            pod.ending = True
            ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
            if reason:
                self._add_event(ns, name, reason, message, "Warning")
            grace = float(pod.obj["spec"].get("terminationGracePeriodSeconds", 30))
        codes = self._stop_containers(pod, graceful=graceful, grace=grace)
        # first the containers' end (phase still Running), then the pod's phase and reason
        for step in ("containers", "phase"):
            if not self._sleep(pod, self.status_delay / 2):
                return
            with self._cond:
                if not self._alive(pod):
                    return
                self._report_end(pod, codes, container_reason)
                if step == "phase":
                    status = pod.obj["status"]
                    status["phase"] = "Failed"
                    if reason:
                        status["reason"] = reason
                        status["message"] = message
                self._changed(pod)

    def _report_end(self, pod: _Pod, codes: dict[str, int], container_reason: str) -> None:
        """Write the ended containers into the pod's status (caller holds the lock)."""
        status = pod.obj["status"]
        status["conditions"] = [{"type": "Ready", "status": "False"}]
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "ready": False,
                "restartCount": 0,
                "image": c["image"],
                "state": {
                    "terminated": {
                        "exitCode": codes.get(c["name"], 137),
                        "reason": container_reason
                        or ("Completed" if codes.get(c["name"]) == 0 else "Error"),
                    }
                },
            }
            for c in pod.obj["spec"]["containers"]
        ]

    def _stop_containers(self, pod: _Pod, *, graceful: bool, grace: float) -> dict[str, int]:
        """Kill a pod's containers and execs; each container's exit code."""
        if graceful:
            for cname, proc in pod.procs.items():
                target = pod.ns_pids.get(cname, proc.pid)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(target, signal.SIGTERM)
            end = time.monotonic() + max(grace, 0.1)
            for proc in pod.procs.values():
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, end - time.monotonic()))
        codes: dict[str, int] = {}
        for cname, proc in pod.procs.items():
            _kill_group(proc)
            code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
            codes[cname] = code if code >= 0 else 128 - code
        # the container's PID namespace ends with its first process: execs die with it
        # (their streams stay open, so each exec still reports its exit status)
        for proc in list(pod.execs):
            _signal_tree(proc, signal.SIGKILL)
        return codes

    def _kill(self, pod: _Pod) -> None:
        for proc in [*pod.procs.values(), *pod.execs]:
            _kill_group(proc)
        for lsock in pod.listeners:
            with contextlib.suppress(OSError):
                lsock.close()
        if pod.net_holder is not None:
            _kill_group(pod.net_holder)
        for sock in pod.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    # ---- internals: container processes ------------------------------------------------

    def _mounts(self, pod: _Pod, container: dict[str, Any]) -> list[tuple[str, Path, bool]]:
        """(mount path, host folder, read-only) for each volume mount of a container."""
        volumes = {v["name"]: v for v in pod.obj["spec"].get("volumes") or []}
        out = []
        for m in container.get("volumeMounts") or []:
            vol = volumes[m["name"]]
            if "emptyDir" in vol:
                # Without mount namespaces the folder must sit where the helper looks.
                src = (
                    pod.root / "view" / m["mountPath"].lstrip("/")
                    if self.runtime == "host"
                    else pod.root / "volumes" / m["name"]
                )
                src.mkdir(parents=True, exist_ok=True)
                src.chmod(0o777)
                pod.empty_dirs[m["name"]] = src
            elif "hostPath" in vol:
                src = Path(vol["hostPath"]["path"])
            elif "persistentVolumeClaim" in vol:
                src = self.claims[vol["persistentVolumeClaim"]["claimName"]]
            else:
                raise ValueError(f"fake kubelet: unsupported volume {vol}")
            if m.get("subPath"):
                src = src / m["subPath"]
            out.append((m["mountPath"], src, bool(m.get("readOnly"))))
        out.extend((path, src, True) for path, src in self.image_folders.items())
        return out

    def _spawn(
        self,
        pod: _Pod,
        container: dict[str, Any],
        argv: list[str],
        stdin: bool,
        into: int | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start a process in a container's view of the pod.

        With ``into`` (a container's first process) the process joins that process's
        namespaces and root, as exec does; without, it starts a container.
        """
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOSTNAME": pod.obj["metadata"]["name"],
            **KUBELET_ENV,
        }
        for e in container.get("env") or []:
            env[e["name"]] = e.get("value", "")
        mounts = self._mounts(pod, container)
        ctx = container.get("securityContext") or {}
        uid = int(
            ctx.get("runAsUser")
            or (pod.obj["spec"].get("securityContext") or {}).get("runAsUser")
            or 65534
        )
        workdir = container.get("workingDir") or "/"
        drop = [
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
        ]
        enter = f'cd {_q(workdir)} 2>/dev/null || cd /; exec "$0" "$@"'
        group = self._memory_group(pod, container)
        join = (
            []
            if group is None
            else ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', str(group / "cgroup.procs")]
        )
        if self.runtime == "chroot" and into is not None:
            full = [
                *join,
                "nsenter",
                "-t",
                str(into),
                "-m",
                "-n",
                "-p",
                "-r",
                "--",
                "setpriv",
                *drop,
                "--",
                "/bin/sh",
                "-c",
                enter,
                *argv,
            ]
        elif self.runtime == "chroot":
            rootfs = pod.root / "rootfs"
            rootfs.mkdir(parents=True, exist_ok=True)
            lines = [
                "set -e",
                f"R={_q(str(rootfs))}",
                'mount -t tmpfs -o size=4m,mode=755 none "$R"',
                'for d in bin sbin lib lib64 lib32; do [ -L "/$d" ] && '
                'ln -s "$(readlink /$d)" "$R/$d" || true; done',
                'for d in usr etc; do mkdir -p "$R/$d"; mount --rbind "/$d" "$R/$d"; '
                'mount -o remount,bind,ro "$R/$d"; done',
                'mkdir -p "$R/proc" "$R/dev"; mount -t proc proc "$R/proc"; '
                'mount --rbind /dev "$R/dev"',
            ]
            # volumes first, then the "image" (the host's Python): a venv that lives under
            # /tmp on the host must not be hidden by the pod's /tmp volume
            for path, src, ro in mounts:
                lines.append(f'mkdir -p "$R"{_q(path)}; mount --bind {_q(str(src))} "$R"{_q(path)}')
                if ro:
                    lines.append(f'mount -o remount,bind,ro "$R"{_q(path)}')
            for extra in self.image_binds:
                lines.append(
                    f'mkdir -p "$R"{_q(extra)}; mount --rbind {_q(extra)} "$R"{_q(extra)}; '
                    f'mount -o remount,bind,ro "$R"{_q(extra)}'
                )
            if group is not None:
                # the container's own memory cgroup where a container finds it (v1 layout)
                cgroup_dir = "/sys/fs/cgroup" if self._cgroup_v2 else "/sys/fs/cgroup/memory"
                lines.append(
                    f'mkdir -p "$R"{cgroup_dir}; mount --bind {_q(str(group))} "$R"{cgroup_dir}; '
                    f'mount -o remount,bind,ro "$R"{cgroup_dir}'
                )
            lines.append(
                f'cd "$R"; exec chroot "$R" setpriv {" ".join(drop)} -- /bin/sh -c {_q(enter)} "$@"'
            )
            full = [
                *join,
                "unshare",
                "--mount",
                "--net",
                "--pid",
                "--fork",
                "--",
                "/bin/sh",
                "-c",
                "\n".join(lines),
                "sh",
                *argv,
            ]
        else:
            view = pod.root / "view"
            view.mkdir(parents=True, exist_ok=True)
            for path, src, _ in mounts:
                target = view / path.lstrip("/")
                if not target.exists() and not target.is_symlink():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.symlink_to(src)
            env["DS_SANDBOX_ROOT"] = str(view)
            full = argv
        return subprocess.Popen(
            full,
            env=env,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def _memory_group(self, pod: _Pod, container: dict[str, Any]) -> Path | None:
        """The container's memory cgroup, limited as its spec says (chroot runtime only).

        Made on first use; None where this host gives the fake no memory cgroups.
        """
        if self._cgroup_base is None:
            return None
        meta = pod.obj["metadata"]
        group = self._cgroup_base / f"{meta['namespace']}.{meta['name']}" / container["name"]
        if group.is_dir():
            return group
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        try:
            group.mkdir(parents=True)
            if limit:
                name = "memory.max" if self._cgroup_v2 else "memory.limit_in_bytes"
                (group / name).write_text(str(_quantity_bytes(str(limit))))
        except OSError as exc:
            logger.warning("fake kubelet: no memory cgroup for %s: %s", meta["name"], exc)
            return None
        return group

    def _remove_memory_groups(self, pod: _Pod) -> None:
        if self._cgroup_base is None:
            return
        meta = pod.obj["metadata"]
        folder = self._cgroup_base / f"{meta['namespace']}.{meta['name']}"
        _remove_cgroup_tree(folder)

    def _start_container(self, pod: _Pod, container: dict[str, Any]) -> subprocess.Popen[bytes]:
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        proc = self._spawn(pod, container, argv, stdin=False)
        pod.procs[container["name"]] = proc
        if self.runtime == "chroot":
            ns_pid = _container_init(proc, pod.root / "rootfs")
            if ns_pid is not None:
                pod.ns_pids[container["name"]] = ns_pid
                main = pod.obj["spec"]["containers"][0]["name"]
                if self.network is not None and container["name"] == main:
                    self._wire_network(pod, ns_pid)
        return proc

    # ---- internals: the pod network (the CNI) ------------------------------------------

    def _wire_network(self, pod: _Pod, ns_pid: int) -> None:
        """Bring ``lo`` up; with allowed ports, link the pod to a network of its own.

        There the controller's address forwards exactly those ports to the host's
        listeners.
        """
        net = self.network
        assert net is not None
        meta = pod.obj["metadata"]
        ports = net.allowed_ports(meta["namespace"], meta.get("labels") or {})
        _in_netns(ns_pid, ["ip", "link", "set", "lo", "up"])
        if not ports:
            return
        holder = subprocess.Popen(
            ["unshare", "--net", "--", "sleep", "infinity"], start_new_session=True
        )
        pod.net_holder = holder
        own = os.readlink("/proc/self/ns/net")
        end = time.monotonic() + 10.0
        while os.readlink(f"/proc/{holder.pid}/ns/net") == own:
            if time.monotonic() > end or holder.poll() is not None:
                raise RuntimeError("fake CNI: the pod network's namespace did not start")
            time.sleep(0.005)
        ctl, pod_ip = net.controller_address, _pod_address(net.controller_address)
        _in_netns(
            holder.pid,
            [
                "ip",
                "link",
                "add",
                "eth0",
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                str(ns_pid),
            ],
        )
        _in_netns(holder.pid, ["ip", "addr", "add", f"{ctl}/24", "dev", "eth0"])
        _in_netns(holder.pid, ["ip", "link", "set", "eth0", "up"])
        _in_netns(ns_pid, ["ip", "addr", "add", f"{pod_ip}/24", "dev", "eth0"])
        _in_netns(ns_pid, ["ip", "link", "set", "eth0", "up"])
        made: list[socket.socket] = []

        def bind_all() -> None:  # in a thread of its own: setns changes only that thread
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/proc/{holder.pid}/ns/net", os.O_RDONLY)
            try:
                if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                    raise OSError(ctypes.get_errno(), "setns")
            finally:
                os.close(fd)
            for port in sorted(ports):
                lsock = socket.socket()
                lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                lsock.bind((ctl, port))
                lsock.listen(64)
                made.append(lsock)

        t = threading.Thread(target=bind_all, name="fake-cni-bind")
        t.start()
        t.join()
        pod.listeners.extend(made)
        threading.Thread(
            target=self._forward_loop, args=(pod, list(made)), name="fake-cni", daemon=True
        ).start()

    def _forward_loop(self, pod: _Pod, listeners: list[socket.socket]) -> None:
        net = self.network
        assert net is not None
        sel = selectors.DefaultSelector()
        for lsock in listeners:
            sel.register(lsock, selectors.EVENT_READ)
        while self._alive(pod):
            try:
                ready = sel.select(timeout=0.2)
            except (OSError, ValueError):
                return
            for key, _ in ready:
                ready_sock = key.fileobj
                if not isinstance(ready_sock, socket.socket):
                    continue
                try:
                    conn, _ = ready_sock.accept()
                except OSError:
                    continue
                port = ready_sock.getsockname()[1]
                threading.Thread(
                    target=_splice, args=(conn, (net.controller_host, port)), daemon=True
                ).start()

    def _exec(self, handler: _Handler, ns: str, name: str, query: dict[str, list[str]]) -> None:
        argv = query.get("command") or []
        cname = (query.get("container") or [""])[0]
        want_stdin = (query.get("stdin") or ["false"])[0] == "true"
        with self._cond:
            pod = self._pods.get((ns, name))
            if pod is None:
                return handler.reply(404, _status(404, "NotFound", f'pods "{name}" not found'))
            spec = pod.obj["spec"]
            containers = {
                c["name"]: c for c in [*spec.get("initContainers", []), *spec["containers"]]
            }
            if not cname:
                cname = spec["containers"][0]["name"]
            container = containers.get(cname)
            running = cname in pod.procs and pod.procs[cname].poll() is None
            if (
                container is None
                or not running
                or pod.obj["status"]["phase"] not in ("Pending", "Running")
            ):
                phase = pod.obj["status"]["phase"]
                return handler.reply(
                    400,
                    _status(
                        400, "BadRequest", f"container {cname} is not running (pod phase {phase})"
                    ),
                )
            trigger = None
            if cname == spec["containers"][0]["name"]:
                pod.main_execs += 1
                if pod.behaviour.outcome in ("oom", "evict", "storage", "deadline") and (
                    pod.main_execs == pod.behaviour.on_exec
                ):
                    trigger = pod.behaviour.outcome
        proto = handler.upgrade()
        if proto is None:
            return None
        proc = self._spawn(pod, container, argv, stdin=want_stdin, into=pod.ns_pids.get(cname))
        with self._cond:
            pod.execs.append(proc)
            pod.sockets.append(handler.connection)
        if trigger:
            threading.Thread(target=self._trigger, args=(pod, trigger), daemon=True).start()
        record = {"pod": name, "container": cname, "stdin_bytes": 0, "output_bytes": 0}
        with self._cond:
            self.exec_log.append(record)
        try:
            _pump(handler, proc, proto, record)
        finally:
            _kill_group(proc)
            with self._cond:
                with contextlib.suppress(ValueError):
                    pod.execs.remove(proc)
                with contextlib.suppress(ValueError):
                    pod.sockets.remove(handler.connection)
        return None

    def _trigger(self, pod: _Pod, what: str) -> None:
        if what == "deadline":
            # counted from the exec's start, so a slow host cannot fire it earlier
            if self._sleep(pod, pod.behaviour.after):
                self._terminate(
                    pod,
                    "DeadlineExceeded",
                    "Pod was active on the node longer than the specified deadline",
                )
            return
        time.sleep(0.2)
        if what == "oom":
            self._terminate(pod, "", "", container_reason="OOMKilled", graceful=False)
        elif what == "evict":
            self._terminate(
                pod,
                "Evicted",
                "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
                "20Mi. Container sandbox was using 3Gi, request is 16Gi, has larger "
                "consumption of memory. ",
            )
        else:
            volumes = {v["name"]: v for v in pod.obj["spec"].get("volumes") or []}
            limit = (volumes.get("output", {}).get("emptyDir") or {}).get("sizeLimit", "1Gi")
            self._terminate(
                pod, "Evicted", f'Usage of EmptyDir volume "output" exceeds the limit "{limit}". '
            )

    def _delete(self, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        with self._cond:
            pod = self._pods.pop((ns, name), None)
            if pod is None:
                return 404, _status(404, "NotFound", f'pods "{name}" not found')
            pod.obj["metadata"]["deletionTimestamp"] = _now()
            self._next_rv()
            self._cond.notify_all()
            obj = copy.deepcopy(pod.obj)
        self._kill(pod)
        self._remove_memory_groups(pod)
        shutil.rmtree(pod.root, ignore_errors=True)
        return 200, obj

    def _list(self, ns: str, query: dict[str, list[str]]) -> dict[str, Any]:
        labels = _parse_selector((query.get("labelSelector") or [""])[0])
        fields = _parse_selector((query.get("fieldSelector") or [""])[0])
        limit = min(int((query.get("limit") or [str(self.page_size)])[0]), self.page_size)
        start = int((query.get("continue") or ["0"])[0] or 0)
        with self._cond:
            items = [
                copy.deepcopy(p.obj)
                for (pns, _), p in sorted(self._pods.items())
                if pns == ns and _matches(p.obj, labels, fields)
            ]
            rv = str(self._rv)
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": rv}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": page}

    def _watch(self, handler: _Handler, ns: str, query: dict[str, list[str]]) -> None:
        labels = _parse_selector((query.get("labelSelector") or [""])[0])
        fields = _parse_selector((query.get("fieldSelector") or [""])[0])
        timeout = float((query.get("timeoutSeconds") or ["30"])[0])
        since = int((query.get("resourceVersion") or ["0"])[0] or 0)
        handler.start_chunked()
        end = time.monotonic() + timeout
        seen: dict[str, int] = {}
        first = True
        try:
            while True:
                with self._cond:
                    events = []
                    current = {
                        pname: p
                        for (pns, pname), p in self._pods.items()
                        if pns == ns and _matches(p.obj, labels, fields)
                    }
                    for pname, p in current.items():
                        rv = int(p.obj["metadata"]["resourceVersion"])
                        if first and not since:
                            events.append(("ADDED", copy.deepcopy(p.obj)))
                        elif (pname in seen and seen[pname] != rv) or (
                            pname not in seen and rv > since
                        ):
                            events.append(("MODIFIED", copy.deepcopy(p.obj)))
                        seen[pname] = rv
                    for pname in [n for n in seen if n not in current]:
                        events.append(("DELETED", {"metadata": {"name": pname, "namespace": ns}}))
                        del seen[pname]
                    first = False
                    if not events:
                        left = end - time.monotonic()
                        if left <= 0 or self._closed:
                            break
                        self._cond.wait(min(left, 0.5))
                        continue
                for kind, obj in events:
                    handler.chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        except OSError:
            return
        with contextlib.suppress(OSError):
            handler.end_chunked()


# ---- HTTP -----------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeKubernetes

    def setup(self) -> None:
        super().setup()
        out = self.server_fake._api_outage
        with out.lock:
            out.conns.add(self.connection)

    def finish(self) -> None:
        out = self.server_fake._api_outage
        with out.lock:
            out.conns.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("fake k8s: " + format, *args)

    def reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_chunked(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    def upgrade(self) -> str | None:
        """Answer the websocket upgrade; the channel protocol chosen (None: refused)."""
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        proto = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered), None)
        key = self.headers.get("Sec-WebSocket-Key")
        if proto is None or not key:
            self.reply(400, _status(400, "BadRequest", "exec needs a websocket upgrade"))
            return None
        accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.close_connection = True
        return proto

    def _route(self, method: str) -> None:
        fake = self.server_fake
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = url.path.strip("/").split("/")
        body: dict[str, Any] = {}
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            body = json.loads(self.rfile.read(length) or b"{}")
        if fake._api_answer(self, method, url.path, parts, query, body):
            return None
        if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5:
            return self.reply(404, _status(404, "NotFound", f"no route {url.path}"))
        ns, resource = parts[3], parts[4]
        name = parts[5] if len(parts) > 5 else None
        sub = parts[6] if len(parts) > 6 else None
        watch = (query.get("watch") or ["false"])[0].lower() in ("true", "1")
        verb = {"POST": "create", "DELETE": "delete"}.get(method) or (
            "exec" if sub == "exec" else "watch" if watch else "get" if name else "list"
        )
        fake.calls[f"{verb} {resource}"] += 1
        fault = fake._fault(method, url.path)
        if fault is not None and not fault.after_effect:
            return self.reply(
                fault.status,
                _status(
                    fault.status,
                    _REASONS.get(fault.status, "InternalError"),
                    "injected by the test",
                ),
            )
        if resource == "events" and method == "GET":
            fields = _parse_selector((query.get("fieldSelector") or [""])[0])
            with fake._cond:
                items = [
                    copy.deepcopy(e)
                    for e in fake._events
                    if e["metadata"]["namespace"] == ns
                    and all(
                        e["involvedObject"].get(k.split(".")[-1]) == v for k, v in fields.items()
                    )
                ]
            return self.reply(
                200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items}
            )
        if resource != "pods":
            return self.reply(404, _status(404, "NotFound", f"no resource {resource}"))
        if sub == "exec":
            return fake._exec(self, ns, name or "", query)
        if method == "POST" and name is None:
            code, obj = fake._create(ns, body)
        elif method == "GET" and name is None and watch:
            return fake._watch(self, ns, query)
        elif method == "GET" and name is None:
            code, obj = 200, fake._list(ns, query)
        elif method == "GET":
            pod = fake.pod(ns, name or "")
            code, obj = (
                (200, pod) if pod else (404, _status(404, "NotFound", f'pods "{name}" not found'))
            )
        elif method == "DELETE":
            code, obj = fake._delete(ns, name or "")
        else:
            code, obj = 405, _status(405, "MethodNotAllowed", method)
        if fault is not None:
            return self.reply(
                fault.status,
                _status(
                    fault.status,
                    _REASONS.get(fault.status, "InternalError"),
                    "answer lost (injected by the test)",
                ),
            )
        return self.reply(code, obj)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")


_REASONS = {
    409: "AlreadyExists",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
    404: "NotFound",
}


def _pump(
    handler: _Handler, proc: subprocess.Popen[bytes], proto: str, record: dict[str, Any]
) -> None:
    """Shuttle exec channels between the websocket and the process until it ends.

    ``record`` counts the bytes each way (``stdin_bytes``, ``output_bytes``).
    """
    sock = handler.connection
    rfile = handler.rfile
    send_lock = threading.Lock()

    def send(opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + n.to_bytes(2, "big")
        else:
            head += bytes([127]) + n.to_bytes(8, "big")
        with send_lock:
            sock.sendall(head + payload)

    def reader() -> None:
        try:
            while True:
                opcode, payload = _read_frame(rfile)
                if opcode == 8 or opcode is None:
                    break
                if opcode in (1, 2) and payload:
                    channel, data = payload[0], payload[1:]
                    if channel == 255 and proto.startswith("v5") and data[:1] == b"\x00":
                        if proc.stdin:
                            proc.stdin.close()
                    elif channel == 0 and proc.stdin and data:
                        record["stdin_bytes"] += len(data)
                        proc.stdin.write(data)
                        proc.stdin.flush()
        except (OSError, ValueError):
            pass

    threading.Thread(target=reader, daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, 1)
        sel.register(proc.stderr, selectors.EVENT_READ, 2)
        try:
            while sel.get_map():
                for key, _ in sel.select(timeout=0.5):
                    data = os.read(key.fd, 65536)
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    record["output_bytes"] += len(data)
                    send(2, bytes([key.data]) + data)
            code = proc.wait()
            if code < 0:  # killed by a signal: the runtime reports 128 + the signal
                code = 128 - code
            if code == 0:
                status = {"metadata": {}, "status": "Success"}
            else:
                status = {
                    "metadata": {},
                    "status": "Failure",
                    "reason": "NonZeroExitCode",
                    "message": f"command terminated with non-zero exit code: {code}",
                    "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
                }
            send(2, b"\x03" + json.dumps(status).encode())
            send(8, b"")
        except OSError:
            pass


def _read_frame(rfile: Any) -> tuple[int | None, bytes]:
    head = rfile.read(2)
    if len(head) < 2:
        return None, b""
    opcode = head[0] & 0x0F
    masked = head[1] & 0x80
    n = head[1] & 0x7F
    if n == 126:
        n = int.from_bytes(rfile.read(2), "big")
    elif n == 127:
        n = int.from_bytes(rfile.read(8), "big")
    mask = rfile.read(4) if masked else b""
    data = rfile.read(n)
    if masked:
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
    return opcode, data


# ---- small helpers --------------------------------------------------------------------------


def _in_netns(pid: int, argv: list[str]) -> None:
    subprocess.run(["nsenter", "-t", str(pid), "-n", "--", *argv], check=True, capture_output=True)


def _pod_address(controller: str) -> str:
    """The pod's own address on its small network (the controller's, plus one)."""
    import ipaddress

    return str(ipaddress.ip_address(controller) + 1)


def _splice(conn: socket.socket, target: tuple[str, int]) -> None:
    """Forward one accepted connection to ``target`` (a refused target closes it)."""
    try:
        up = socket.create_connection(target, timeout=10)
    except OSError:
        conn.close()
        return
    up.settimeout(None)

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    back = threading.Thread(target=pump, args=(up, conn), daemon=True)
    back.start()
    pump(conn, up)
    back.join()
    conn.close()
    up.close()


def _pick_runtime(runtime: str) -> str:
    if runtime not in ("auto", "chroot", "host"):
        raise ValueError(f"runtime must be auto, chroot or host, got {runtime!r}")
    possible = (
        os.geteuid() == 0
        and shutil.which("unshare") is not None
        and shutil.which("setpriv") is not None
    )
    if runtime == "chroot" and not possible:
        raise RuntimeError("the chroot runtime needs root, unshare and setpriv")
    if runtime == "auto":
        if possible:
            probe = subprocess.run(
                ["unshare", "--mount", "--net", "--pid", "--fork", "true"],
                capture_output=True,
                check=False,
            )
            return "chroot" if probe.returncode == 0 else "host"
        return "host"
    return runtime


def _container_init(proc: subprocess.Popen[bytes], rootfs: Path) -> int | None:
    """The host pid of a container's first process once it has entered its root."""
    end = time.monotonic() + 10.0
    while time.monotonic() < end and proc.poll() is None:
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            if children and os.readlink(f"/proc/{children[0]}/root") == str(rootfs):
                return int(children[0])
        except OSError:
            pass
        time.sleep(0.005)
    return None


def _memory_cgroup_base(runtime: str) -> tuple[bool, Path | None]:
    """(v2?, a fresh memory cgroup folder of this fake), or (False, None) where there is none."""
    if runtime != "chroot":
        return False, None
    v1 = Path("/sys/fs/cgroup/memory")
    v2 = Path("/sys/fs/cgroup")
    if (v1 / "memory.limit_in_bytes").exists() or (v1 / "tasks").exists():
        parent, is_v2 = v1, False
    elif "memory" in _read(v2 / "cgroup.subtree_control").split():
        parent, is_v2 = v2, True
    else:
        return False, None
    base = parent / f"ds-fake-k8s-{uuid.uuid4().hex[:8]}"
    try:
        base.mkdir()
        if is_v2:
            (base / "cgroup.subtree_control").write_text("+memory")
    except OSError:
        with contextlib.suppress(OSError):
            base.rmdir()
        return False, None
    return is_v2, base


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _remove_cgroup_tree(folder: Path) -> None:
    """Remove a cgroup folder and its children (their processes are gone by now)."""
    if not folder.is_dir():
        return
    for child in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            child.rmdir()
    for _ in range(50):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)  # the last process of the group is still being reaped
    logger.warning("fake kubelet: cgroup %s could not be removed", folder)


def _resource_amount(key: str, text: str) -> float:
    """A quantity of ``cpu`` (in cores) or ``memory`` (in bytes).

    >>> _resource_amount("cpu", "500m"), _resource_amount("cpu", "2")
    (0.5, 2.0)
    """
    if key == "cpu":
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    return float(_quantity_bytes(text))


def _pod_requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """What the scheduler counts for a pod: containers summed, or the largest init container."""
    out = {"cpu": 0.0, "memory": 0.0}
    inits = {"cpu": 0.0, "memory": 0.0}
    for kind, sink in (("containers", out), ("initContainers", inits)):
        for c in spec.get(kind) or []:
            requests = (c.get("resources") or {}).get("requests") or {}
            for key in sink:
                if key in requests:
                    amount = _resource_amount(key, str(requests[key]))
                    sink[key] = (
                        sink[key] + amount if kind == "containers" else max(sink[key], amount)
                    )
    return {key: max(out[key], inits[key]) for key in out}


def _disk_usage(folder: Path) -> int:
    """Bytes a folder takes on disk, as ``du`` counts them (links not followed)."""
    total = 0
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
    return total


def _bytes_quantity(size: int) -> str:
    for suffix, unit in (("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def _quantity_bytes(text: str) -> int:
    """Bytes of a Kubernetes memory quantity.

    >>> _quantity_bytes("512Mi"), _quantity_bytes("1G"), _quantity_bytes("1000")
    (536870912, 1000000000, 1000)
    """
    units = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "k": 1000, "M": 10**6}
    units.update({"G": 10**9, "T": 10**12})
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * units[suffix])
    return int(float(text))


def chroot_runtime_available() -> bool:
    """Whether this host can run the fake's isolated container runtime."""
    try:
        return _pick_runtime("auto") == "chroot"
    except (OSError, RuntimeError):
        return False


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def _signal_tree(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Signal a process, everything it started and its process group."""
    if proc.poll() is None:
        for pid in _descendants(proc.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        _signal_tree(proc, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _q(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _waiting(name: str, reason: str, image: str) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": image,
        "state": {"waiting": {"reason": reason, "message": f'Back-off pulling image "{image}"'}},
    }


def _parse_selector(text: str) -> dict[str, str]:
    out = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip().lstrip("=")
    return out


def _matches(obj: dict[str, Any], labels: dict[str, str], fields: dict[str, str]) -> bool:
    have = obj["metadata"].get("labels") or {}
    if any(have.get(k) != v for k, v in labels.items()):
        return False
    for key, value in fields.items():
        if key == "metadata.name" and obj["metadata"]["name"] != value:
            return False
        if key == "metadata.namespace" and obj["metadata"]["namespace"] != value:
            return False
    return True


@contextlib.contextmanager
def fake_kubernetes(**kwargs: Any) -> Iterator[FakeKubernetes]:
    """Serve a ``FakeKubernetes`` for the ``with`` block (its URL is ``fake.url``)."""
    fake = FakeKubernetes(**kwargs)
    fake.start()
    try:
        yield fake
    finally:
        fake.close()


__all__ = [
    "KUBELET_ENV",
    "NODE",
    "NODE_ALLOCATABLE",
    "RUNTIME_MANIFEST",
    "Behaviour",
    "FakeKubernetes",
    "PodNetwork",
    "chroot_runtime_available",
    "fake_kubernetes",
]
