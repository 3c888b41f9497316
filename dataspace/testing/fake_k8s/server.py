"""The fake API server: what it stores, answers and refuses (``FakeKubernetes``).

It serves, on 127.0.0.1, exactly what the ``kubernetes`` sandbox backend uses through the
real ``kubernetes`` client (see the package docstring for the routes), with the policy's
refusals first (``policy.ApiPolicy``: RBAC, namespaces, admission, quota), pods and
events kept in a ``store.PodStore``, run by a ``kubelet.Kubelet``; ``fail_next`` makes it
answer 5xx or 409 (optionally after doing the work, a lost answer) and ``outage`` takes
it down as a restart does.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import shutil
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dataspace.testing.fake_k8s.containers import ContainerRuntime, kill_group, pick_runtime
from dataspace.testing.fake_k8s.handler import REASONS, ApiHandler, Outage, pump
from dataspace.testing.fake_k8s.kubelet import Kubelet
from dataspace.testing.fake_k8s.network import PodNetwork
from dataspace.testing.fake_k8s.policy import NODE, NODE_ALLOCATABLE, ApiPolicy, node, status
from dataspace.testing.fake_k8s.store import (
    Behaviour,
    Fault,
    Pod,
    PodStore,
    matches,
    parse_selector,
    timestamp,
)
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
        runtime = pick_runtime(runtime)
        if network is not None and runtime != "chroot":
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
        self._store = PodStore()
        self._containers = ContainerRuntime(
            runtime,
            claims=self.claims,
            image_binds=self.image_binds,
            image_folders=self.image_folders,
            network=network,
            alive=self._store.alive,
        )
        allocatable = dict(node_allocatable or NODE_ALLOCATABLE)
        self.kubelet = Kubelet(
            self._store,
            self._containers,
            claims=self.claims,
            node_allocatable=allocatable,
            user_namespaces=user_namespaces,
            status_delay=status_delay,
            eviction_interval=eviction_interval,
        )
        self._server: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self.policy = ApiPolicy(
            nodes=[node(NODE, cpu=allocatable["cpu"], memory=allocatable["memory"])]
        )
        self.kubelet.hold_image = self._hold_image
        self._outage = Outage()

    # ---- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> FakeKubernetes:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start serving on 127.0.0.1 (a free port)."""

        class Handler(ApiHandler):
            api = self
            outage = self._outage

        self._server, self._thread = LoopbackHTTPServer.serve(Handler, name="fake-k8s")
        self._outage.handler = Handler
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        """Stop serving; kill every container process; remove the fake's files."""
        store = self._store
        with store.cond:
            store.closed = True
            pods = list(store.pods.values())
            store.cond.notify_all()
        for pod in pods:
            self._containers.kill(pod)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._containers.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    # ---- the kubelet's settings ---------------------------------------------------------

    @property
    def runtime(self) -> str:
        """``chroot`` or ``host``: how containers run (see ``containers``)."""
        return self._containers.runtime

    @property
    def memory_cgroups(self) -> bool:
        """Whether containers get memory cgroups of their limits (the kernel OOM-kills)."""
        return self._containers.memory_cgroups

    @property
    def status_delay(self) -> float:
        """Seconds from the kubelet killing a pod's containers to its status saying so."""
        return self.kubelet.status_delay

    @status_delay.setter
    def status_delay(self, seconds: float) -> None:
        self.kubelet.status_delay = seconds

    @property
    def eviction_interval(self) -> float:
        """Seconds between the eviction manager's checks of a pod's local storage."""
        return self.kubelet.eviction_interval

    @eviction_interval.setter
    def eviction_interval(self, seconds: float) -> None:
        self.kubelet.eviction_interval = seconds

    @property
    def node_allocatable(self) -> dict[str, str]:
        """``cpu`` and ``memory`` of the one node."""
        return self.kubelet.node_allocatable

    @property
    def user_namespaces(self) -> bool:
        """Whether the runtime supports ``hostUsers: false``."""
        return self.kubelet.user_namespaces

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
        with self._store.cond:
            self._store.faults.append(Fault(method.upper(), contains, status, count, after_effect))

    def add_claim(
        self,
        name: str,
        folder: Path,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """A bound PersistentVolumeClaim backed by ``folder``, with labels and annotations."""
        with self._store.cond:
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
    def created_total(self) -> int:
        """Pods created so far."""
        return self._store.created_total

    @property
    def max_pending_seen(self) -> int:
        """The most pods Pending at once so far."""
        return self._store.max_pending_seen

    def pod_names(self, namespace: str | None = None) -> list[str]:
        """Names of the pods that exist now."""
        with self._store.cond:
            return sorted(n for (ns, n) in self._store.pods if namespace in (None, ns))

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of one pod object."""
        with self._store.cond:
            pod = self._store.pods.get((namespace, name))
            return copy.deepcopy(pod.obj) if pod else None

    def events(self, namespace: str | None = None) -> list[dict[str, Any]]:
        """Copies of the events recorded (they outlive their pods, as on a cluster)."""
        with self._store.cond:
            return [
                copy.deepcopy(e)
                for e in self._store.events
                if namespace in (None, e["metadata"]["namespace"])
            ]

    def add_event(
        self, namespace: str, name: str, reason: str, message: str, kind: str = "Normal"
    ) -> None:
        """Record an event about a pod."""
        with self._store.cond:
            self._store.add_event(namespace, name, reason, message, kind)

    # ---- outages ------------------------------------------------------------------------

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
        out = self._outage
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
            if not self._store.closed:
                self._server, self._thread = LoopbackHTTPServer.serve(
                    handler, name="fake-k8s", port=port
                )
            time.sleep(unavailable)
            out.over.set()

        threading.Thread(target=back, name="fake-k8s-outage", daemon=True).start()
        return out.over

    # ---- answering requests -------------------------------------------------------------

    def serve_request(self, handler: ApiHandler, method: str) -> None:
        """Answer one request (called by the HTTP handler)."""
        url = urlsplit(handler.path)
        query = parse_qs(url.query)
        parts = url.path.strip("/").split("/")
        body: dict[str, Any] = {}
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            body = json.loads(handler.rfile.read(length) or b"{}")
        if self._api_answer(handler, method, url.path, parts, query, body):
            return None
        if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5:
            return handler.reply(404, status(404, "NotFound", f"no route {url.path}"))
        ns, resource = parts[3], parts[4]
        name = parts[5] if len(parts) > 5 else None
        sub = parts[6] if len(parts) > 6 else None
        watch = (query.get("watch") or ["false"])[0].lower() in ("true", "1")
        verb = {"POST": "create", "DELETE": "delete"}.get(method) or (
            "exec" if sub == "exec" else "watch" if watch else "get" if name else "list"
        )
        self.calls[f"{verb} {resource}"] += 1
        fault = self._store.take_fault(method, url.path)
        if fault is not None and not fault.after_effect:
            return handler.reply(
                fault.status,
                status(
                    fault.status,
                    REASONS.get(fault.status, "InternalError"),
                    "injected by the test",
                ),
            )
        if resource == "events" and method == "GET":
            fields = parse_selector((query.get("fieldSelector") or [""])[0])
            with self._store.cond:
                items = [
                    copy.deepcopy(e)
                    for e in self._store.events
                    if e["metadata"]["namespace"] == ns
                    and all(
                        e["involvedObject"].get(k.split(".")[-1]) == v for k, v in fields.items()
                    )
                ]
            return handler.reply(
                200, {"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items}
            )
        if resource != "pods":
            return handler.reply(404, status(404, "NotFound", f"no resource {resource}"))
        if sub == "exec":
            return self._exec(handler, ns, name or "", query)
        if method == "POST" and name is None:
            code, obj = self._create(ns, body)
        elif method == "GET" and name is None and watch:
            return self._watch(handler, ns, query)
        elif method == "GET" and name is None:
            code, obj = 200, self._list(ns, query)
        elif method == "GET":
            pod = self.pod(ns, name or "")
            code, obj = (
                (200, pod) if pod else (404, status(404, "NotFound", f'pods "{name}" not found'))
            )
        elif method == "DELETE":
            code, obj = self._delete(ns, name or "")
        else:
            code, obj = 405, status(405, "MethodNotAllowed", method)
        if fault is not None:
            return handler.reply(
                fault.status,
                status(
                    fault.status,
                    REASONS.get(fault.status, "InternalError"),
                    "answer lost (injected by the test)",
                ),
            )
        return handler.reply(code, obj)

    def _api_answer(
        self,
        handler: ApiHandler,
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
        if time.monotonic() < self._outage.unavailable_until:
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
        target = _request_target(method, parts, query)
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
            want = parse_selector((query.get("labelSelector") or [""])[0])
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
            fault = self._store.take_fault(method, path)
            if fault is not None and not fault.after_effect:
                handler.reply(
                    fault.status,
                    status(
                        fault.status,
                        REASONS.get(fault.status, "InternalError"),
                        "injected by the test",
                    ),
                )
                return True
            with policy.lock:  # the check and the create at once, as quota admission is
                with self._store.cond:
                    live = [
                        p.obj for (pns, _), p in self._store.pods.items()
                        if pns == ns and p.obj["status"]["phase"] in ("Pending", "Running")
                    ]  # fmt: skip
                    live = copy.deepcopy(live)
                meta = body.setdefault("metadata", {})
                if not meta.get("name"):
                    code, obj = 422, status(422, "Invalid", "metadata.name: Required value")
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
                    status(
                        fault.status,
                        REASONS.get(fault.status, "InternalError"),
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
        with self._store.cond:
            if (ns, body["metadata"]["name"]) in self._store.pods:
                name = body["metadata"]["name"]
                return 409, status(409, "AlreadyExists", f'pods "{name}" already exists')
        obj = copy.deepcopy(body)
        obj["metadata"].update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=timestamp())
        obj["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
        return 201, obj

    def _create(self, ns: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        meta = body.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            return 422, status(422, "Invalid", "metadata.name: Required value")
        with self._store.cond:
            if (ns, name) in self._store.pods:
                return 409, status(409, "AlreadyExists", f'pods "{name}" already exists')
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=timestamp())
            body["status"] = {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Pending"}],
            }
            # a pod's files are its own: one made again under the same name (a retried
            # create, a rerun) never shares them with one still being removed
            root = self._dir / ns / f"{name}-{meta['uid'][:8]}"
            pod = Pod(obj=body, behaviour=self.behaviour, root=root)
            self._store.pods[(ns, name)] = pod
            self._store.created_total += 1
            self._store.changed(pod)
            result = copy.deepcopy(body)
        self.kubelet.start(pod)
        return 201, result

    def _exec(self, handler: ApiHandler, ns: str, name: str, query: dict[str, list[str]]) -> None:
        argv = query.get("command") or []
        cname = (query.get("container") or [""])[0]
        want_stdin = (query.get("stdin") or ["false"])[0] == "true"
        with self._store.cond:
            pod = self._store.pods.get((ns, name))
            if pod is None:
                return handler.reply(404, status(404, "NotFound", f'pods "{name}" not found'))
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
                    status(
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
        proc = self._containers.spawn(
            pod, container, argv, stdin=want_stdin, into=pod.ns_pids.get(cname)
        )
        with self._store.cond:
            pod.execs.append(proc)
            pod.sockets.append(handler.connection)
        if trigger:
            threading.Thread(target=self.kubelet.trigger, args=(pod, trigger), daemon=True).start()
        record = {"pod": name, "container": cname, "stdin_bytes": 0, "output_bytes": 0}
        with self._store.cond:
            self.exec_log.append(record)
        try:
            pump(handler, proc, proto, record)
        finally:
            kill_group(proc)
            with self._store.cond:
                with contextlib.suppress(ValueError):
                    pod.execs.remove(proc)
                with contextlib.suppress(ValueError):
                    pod.sockets.remove(handler.connection)
        return None

    def _delete(self, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        with self._store.cond:
            pod = self._store.pods.pop((ns, name), None)
            if pod is None:
                return 404, status(404, "NotFound", f'pods "{name}" not found')
            pod.obj["metadata"]["deletionTimestamp"] = timestamp()
            self._store.next_rv()
            self._store.cond.notify_all()
            obj = copy.deepcopy(pod.obj)
        self.kubelet.remove(pod)
        return 200, obj

    def _list(self, ns: str, query: dict[str, list[str]]) -> dict[str, Any]:
        labels = parse_selector((query.get("labelSelector") or [""])[0])
        fields = parse_selector((query.get("fieldSelector") or [""])[0])
        limit = min(int((query.get("limit") or [str(self.page_size)])[0]), self.page_size)
        start = int((query.get("continue") or ["0"])[0] or 0)
        with self._store.cond:
            items = [
                copy.deepcopy(p.obj)
                for (pns, _), p in sorted(self._store.pods.items())
                if pns == ns and matches(p.obj, labels, fields)
            ]
            rv = str(self._store.rv)
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": rv}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": page}

    def _watch(self, handler: ApiHandler, ns: str, query: dict[str, list[str]]) -> None:
        labels = parse_selector((query.get("labelSelector") or [""])[0])
        fields = parse_selector((query.get("fieldSelector") or [""])[0])
        timeout = float((query.get("timeoutSeconds") or ["30"])[0])
        since = int((query.get("resourceVersion") or ["0"])[0] or 0)
        handler.start_chunked()
        end = time.monotonic() + timeout
        seen: dict[str, int] = {}
        first = True
        try:
            while True:
                with self._store.cond:
                    events = []
                    current = {
                        pname: p
                        for (pns, pname), p in self._store.pods.items()
                        if pns == ns and matches(p.obj, labels, fields)
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
                        if left <= 0 or self._store.closed:
                            break
                        self._store.cond.wait(min(left, 0.5))
                        continue
                for kind, obj in events:
                    handler.chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        except OSError:
            return
        with contextlib.suppress(OSError):
            handler.end_chunked()


def _request_target(
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


@contextlib.contextmanager
def fake_kubernetes(**kwargs: Any) -> Iterator[FakeKubernetes]:
    """Serve a ``FakeKubernetes`` for the ``with`` block (its URL is ``fake.url``)."""
    fake = FakeKubernetes(**kwargs)
    fake.start()
    try:
        yield fake
    finally:
        fake.close()


__all__ = ["RUNTIME_MANIFEST", "FakeKubernetes", "fake_kubernetes"]
