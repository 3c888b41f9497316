"""The fake API server's storage: pods, events, resource versions and scripted faults.

One ``PodStore`` is shared by the API server (``server``), the kubelet (``kubelet``) and
the container runtime (``containers``); its condition variable guards every field and
wakes watchers, schedulers and sleeping pod threads on each change.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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


@dataclass
class Pod:
    """A pod object and what the kubelet runs for it."""

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


@dataclass
class Fault:
    """A scripted error answer (see ``FakeKubernetes.fail_next``)."""

    method: str
    contains: str
    status: int
    count: int
    after_effect: bool


class PodStore:
    """Every pod and event, under one lock (``cond``) that also signals each change.

    Attributes:
        cond: guards every field; notified whenever a pod changes or goes away.
        pods: (namespace, name) -> pod.
        events: the events recorded (they outlive their pods, as on a cluster).
        faults: scripted error answers still to give.
        rv: the last resource version handed out.
        closed: the fake is shutting down (every pod thread ends).
        created_total: pods created so far.
        max_pending_seen: the most pods Pending at once so far.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pods: dict[tuple[str, str], Pod] = {}
        self.events: list[dict[str, Any]] = []
        self.faults: list[Fault] = []
        self.rv = 0
        self.closed = False
        self.created_total = 0
        self.max_pending_seen = 0

    def next_rv(self) -> str:
        """A new resource version (caller holds the lock)."""
        self.rv += 1
        return str(self.rv)

    def changed(self, pod: Pod) -> None:
        """Bump the version and wake watchers (caller holds the lock)."""
        pod.obj["metadata"]["resourceVersion"] = self.next_rv()
        pending = sum(1 for p in self.pods.values() if p.obj["status"]["phase"] == "Pending")
        self.max_pending_seen = max(self.max_pending_seen, pending)
        self.cond.notify_all()

    def add_event(
        self, ns: str, name: str, reason: str, message: str, kind: str = "Normal"
    ) -> None:
        """Record an event about a pod, or count a repeat (caller holds the lock)."""
        now = timestamp()
        for e in self.events:
            if e["involvedObject"]["name"] == name and e["reason"] == reason:
                e["count"] += 1
                e["lastTimestamp"] = now
                return
        self.events.append(
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

    def take_fault(self, method: str, path: str) -> Fault | None:
        """The scripted fault this request meets, if any (counted down)."""
        with self.cond:
            for f in self.faults:
                if f.method == method and f.contains in path and f.count > 0:
                    f.count -= 1
                    return f
        return None

    def alive(self, pod: Pod) -> bool:
        """The pod still exists and has not ended (caller holds the lock)."""
        key = (pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"])
        return (
            not self.closed
            and self.pods.get(key) is pod
            and pod.obj["status"]["phase"] in ("Pending", "Running")
        )

    def sleep(self, pod: Pod, seconds: float) -> bool:
        """Sleep unless the pod goes away; whether it is still there."""
        end = time.monotonic() + seconds
        with self.cond:
            while self.alive(pod):
                left = end - time.monotonic()
                if left <= 0:
                    return True
                self.cond.wait(left)
        return False


def timestamp() -> str:
    """Now, as the API server writes times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def parse_selector(text: str) -> dict[str, str]:
    """``a=b,c==d`` -> ``{"a": "b", "c": "d"}`` (equality selectors only).

    >>> parse_selector("app=x,metadata.name==p")
    {'app': 'x', 'metadata.name': 'p'}
    """
    out = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip().lstrip("=")
    return out


def matches(obj: dict[str, Any], labels: dict[str, str], fields: dict[str, str]) -> bool:
    """Whether an object has the labels and the (name, namespace) fields asked for."""
    have = obj["metadata"].get("labels") or {}
    if any(have.get(k) != v for k, v in labels.items()):
        return False
    for key, value in fields.items():
        if key == "metadata.name" and obj["metadata"]["name"] != value:
            return False
        if key == "metadata.namespace" and obj["metadata"]["namespace"] != value:
            return False
    return True


__all__ = ["Behaviour", "Fault", "Pod", "PodStore", "matches", "parse_selector", "timestamp"]
