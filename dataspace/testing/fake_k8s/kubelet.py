"""The fake kubelet: what happens to a pod between its creation and its end.

It behaves as a real one where the sandbox backend depends on it: it schedules by
requests on one node (``node_allocatable``) and leaves pods with missing claims Pending
(``FailedScheduling``); with ``user_namespaces=False`` it leaves pods with ``hostUsers:
false`` ContainerCreating (Warning events only); it runs init containers, then the
containers (``containers.ContainerRuntime``); it kills a pod's containers first (SIGTERM
to PID 1, or SIGKILL for an OOM; execs end with 137) and writes the end into the pod's
status ``status_delay`` seconds later, the containers' end before the phase; it evicts
pods whose emptyDirs or ephemeral storage exceed their limits (measured every
``eviction_interval``) and ends pods at their ``activeDeadlineSeconds``; the images of the
pods it runs are listed in its node's status (``hold_image``, set by the API server).

The scripted ``Behaviour`` of a pod plays the rest of what clusters do to pods: image
pull failure, Pending for ever, OOM kill or node-pressure eviction while the n-th exec
runs, a deadline counted from an exec.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dataspace.testing.fake_k8s.containers import (
    ContainerRuntime,
    kill_group,
    quantity_bytes,
    signal_tree,
)
from dataspace.testing.fake_k8s.policy import NODE
from dataspace.testing.fake_k8s.store import Pod, PodStore, timestamp


class Kubelet:
    """Runs the pods of a ``PodStore`` on one node.

    Args:
        store: the API server's pods and events.
        containers: the container runtime.
        claims: PersistentVolumeClaim name -> host folder (shared with the API server).
        node_allocatable: ``cpu`` and ``memory`` of the one node.
        user_namespaces: whether the runtime supports ``hostUsers: false``.
        status_delay: seconds from the kubelet killing a pod's containers to the pod's
            status saying so (an attribute: tests may lower it).
        eviction_interval: seconds between the eviction manager's storage checks (an
            attribute).
    """

    def __init__(
        self,
        store: PodStore,
        containers: ContainerRuntime,
        *,
        claims: dict[str, Path],
        node_allocatable: dict[str, str],
        user_namespaces: bool,
        status_delay: float,
        eviction_interval: float,
    ) -> None:
        self.store = store
        self.containers = containers
        self.claims = claims
        self.node_allocatable = node_allocatable
        self.user_namespaces = user_namespaces
        self.status_delay = status_delay
        self.eviction_interval = eviction_interval
        # node name, images -> None: the API server lists them in the node's status
        self.hold_image: Callable[[str, list[str]], None] = lambda _node, _images: None

    def start(self, pod: Pod) -> None:
        """Take a newly created pod through its life, in a thread of its own."""
        threading.Thread(target=self._lifecycle, args=(pod,), daemon=True).start()

    def remove(self, pod: Pod) -> None:
        """A deleted pod: kill its processes, remove its cgroups and files."""
        self.containers.kill(pod)
        self.containers.remove_memory_groups(pod)
        shutil.rmtree(pod.root, ignore_errors=True)

    def _lifecycle(self, pod: Pod) -> None:
        b = pod.behaviour
        ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
        if not self.store.sleep(pod, b.start_delay):
            return
        if b.outcome != "unschedulable" and not self._schedule(pod):
            return
        with self.store.cond:
            if not self.store.alive(pod):
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
                self.store.add_event(ns, name, "FailedScheduling", msg, "Warning")
                self.store.changed(pod)
                return
            pod.obj["spec"]["nodeName"] = NODE
            status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
            status["startTime"] = timestamp()
            pod.started_at = time.monotonic()
            self.store.add_event(
                ns, name, "Scheduled", f"Successfully assigned {ns}/{name} to {NODE}"
            )
            if b.outcome == "image_pull":
                image = pod.obj["spec"]["containers"][0]["image"]
                self.store.add_event(ns, name, "Pulling", f'Pulling image "{image}"')
                status["containerStatuses"] = [
                    _waiting(c["name"], "ErrImagePull", image)
                    for c in pod.obj["spec"]["containers"]
                ]
                self.store.add_event(
                    ns, name, "Failed", f'Failed to pull image "{image}": not found', "Warning"
                )
                self.store.changed(pod)
        if b.outcome == "image_pull":
            if self.store.sleep(pod, 0.2):
                with self.store.cond:
                    image = pod.obj["spec"]["containers"][0]["image"]
                    pod.obj["status"]["containerStatuses"] = [
                        _waiting(c["name"], "ImagePullBackOff", image)
                        for c in pod.obj["spec"]["containers"]
                    ]
                    self.store.add_event(
                        ns, name, "BackOff", f'Back-off pulling image "{image}"', "Warning"
                    )
                    self.store.changed(pod)
            return
        if pod.obj["spec"].get("hostUsers") is False and not self.user_namespaces:
            self._sandbox_refused(
                pod, "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
            )
            return
        spec = pod.obj["spec"]
        self.hold_image(NODE, [c["image"] for c in spec.get("initContainers") or []]
                        + [c["image"] for c in spec["containers"]])  # fmt: skip
        self._deadline_timer(pod)
        for init in pod.obj["spec"].get("initContainers") or []:
            proc = self.containers.start_container(pod, init)
            with self.store.cond:
                pod.obj["status"]["initContainerStatuses"] = [
                    {
                        "name": init["name"],
                        "ready": False,
                        "state": {"running": {"startedAt": timestamp()}},
                    }
                ]
                self.store.changed(pod)
            code = proc.wait()
            with self.store.cond:
                if not self.store.alive(pod):
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
                    self.store.changed(pod)
                    return
                self.store.changed(pod)
        for container in pod.obj["spec"]["containers"]:
            self.containers.start_container(pod, container)
        with self.store.cond:
            if not self.store.alive(pod):
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
                    "state": {"running": {"startedAt": timestamp()}},
                }
                for c in pod.obj["spec"]["containers"]
            ]
            self.store.add_event(ns, name, "Started", "Started container sandbox")
            self.store.changed(pod)
        threading.Thread(target=self._watch_storage, args=(pod,), daemon=True).start()

    def _watch_storage(self, pod: Pod) -> None:
        """The eviction manager's local storage checks, every ``eviction_interval`` seconds.

        An emptyDir past its ``sizeLimit``, or the pod's emptyDirs on disk past the sum of
        its containers' ``ephemeral-storage`` limits, evicts the pod with the kubelet's
        own reason and message.
        """
        spec = pod.obj["spec"]
        limits = {
            v["name"]: quantity_bytes(str(v["emptyDir"]["sizeLimit"]))
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
            total += quantity_bytes(str(quantity)) if quantity else 0
        while self.store.sleep(pod, self.eviction_interval):
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
                self.terminate(pod, "Evicted", message)
                return

    def _schedule(self, pod: Pod) -> bool:
        """Bind the pod to the node once its claims exist and its requests fit.

        Until then it stays Pending with a ``FailedScheduling`` Warning, as the scheduler
        leaves it, and is tried again whenever pods change (or each second). False: the
        pod went away first.
        """
        ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
        reported, last_event = "", 0.0
        while True:
            with self.store.cond:
                if not self.store.alive(pod):
                    return False
                why = self._unschedulable(pod)
                if why is None:
                    pod.obj["spec"]["nodeName"] = NODE
                    return True
                if time.monotonic() - last_event >= 1.0:
                    self.store.add_event(ns, name, "FailedScheduling", why, "Warning")
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
                    self.store.changed(pod)
                self.store.cond.wait(1.0)

    def _unschedulable(self, pod: Pod) -> str | None:
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
        for other in self.store.pods.values():
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

    def _sandbox_refused(self, pod: Pod, why: str) -> None:
        """The runtime cannot create the pod's sandbox: ContainerCreating, a Warning per try."""
        ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
        with self.store.cond:
            if not self.store.alive(pod):
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
            self.store.changed(pod)
        while True:
            with self.store.cond:
                if not self.store.alive(pod):
                    return
                self.store.add_event(
                    ns,
                    name,
                    "FailedCreatePodSandBox",
                    f"Failed to create pod sandbox: {why}",
                    "Warning",
                )
            if not self.store.sleep(pod, 1.0):
                return

    def _deadline_timer(self, pod: Pod) -> None:
        seconds = pod.obj["spec"].get("activeDeadlineSeconds")
        if not seconds:
            return

        def fire() -> None:
            if self.store.sleep(pod, float(seconds)):
                self.terminate(
                    pod,
                    "DeadlineExceeded",
                    "Pod was active on the node longer than the specified deadline",
                )

        threading.Thread(target=fire, daemon=True).start()

    def terminate(
        self,
        pod: Pod,
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
        with self.store.cond:
            if not self.store.alive(pod) or pod.ending:
                return
            pod.ending = True
            ns, name = pod.obj["metadata"]["namespace"], pod.obj["metadata"]["name"]
            if reason:
                self.store.add_event(ns, name, reason, message, "Warning")
            grace = float(pod.obj["spec"].get("terminationGracePeriodSeconds", 30))
        codes = self._stop_containers(pod, graceful=graceful, grace=grace)
        # first the containers' end (phase still Running), then the pod's phase and reason
        for step in ("containers", "phase"):
            if not self.store.sleep(pod, self.status_delay / 2):
                return
            with self.store.cond:
                if not self.store.alive(pod):
                    return
                self._report_end(pod, codes, container_reason)
                if step == "phase":
                    status = pod.obj["status"]
                    status["phase"] = "Failed"
                    if reason:
                        status["reason"] = reason
                        status["message"] = message
                self.store.changed(pod)

    def _report_end(self, pod: Pod, codes: dict[str, int], container_reason: str) -> None:
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

    def _stop_containers(self, pod: Pod, *, graceful: bool, grace: float) -> dict[str, int]:
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
            kill_group(proc)
            code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
            codes[cname] = code if code >= 0 else 128 - code
        # the container's PID namespace ends with its first process: execs die with it
        # (their streams stay open, so each exec still reports its exit status)
        for proc in list(pod.execs):
            signal_tree(proc, signal.SIGKILL)
        return codes

    def trigger(self, pod: Pod, what: str) -> None:
        """What the pod's ``Behaviour`` does once its ``on_exec``-th exec has started."""
        if what == "deadline":
            # counted from the exec's start, so a slow host cannot fire it earlier
            if self.store.sleep(pod, pod.behaviour.after):
                self.terminate(
                    pod,
                    "DeadlineExceeded",
                    "Pod was active on the node longer than the specified deadline",
                )
            return
        time.sleep(0.2)
        if what == "oom":
            self.terminate(pod, "", "", container_reason="OOMKilled", graceful=False)
        elif what == "evict":
            self.terminate(
                pod,
                "Evicted",
                "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
                "20Mi. Container sandbox was using 3Gi, request is 16Gi, has larger "
                "consumption of memory. ",
            )
        else:
            volumes = {v["name"]: v for v in pod.obj["spec"].get("volumes") or []}
            limit = (volumes.get("output", {}).get("emptyDir") or {}).get("sizeLimit", "1Gi")
            self.terminate(
                pod, "Evicted", f'Usage of EmptyDir volume "output" exceeds the limit "{limit}". '
            )


def _resource_amount(key: str, text: str) -> float:
    """A quantity of ``cpu`` (in cores) or ``memory`` (in bytes).

    >>> _resource_amount("cpu", "500m"), _resource_amount("cpu", "2")
    (0.5, 2.0)
    """
    if key == "cpu":
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    return float(quantity_bytes(text))


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


def _waiting(name: str, reason: str, image: str) -> dict[str, Any]:
    return {
        "name": name,
        "ready": False,
        "restartCount": 0,
        "image": image,
        "state": {"waiting": {"reason": reason, "message": f'Back-off pulling image "{image}"'}},
    }


__all__ = ["Kubelet"]
