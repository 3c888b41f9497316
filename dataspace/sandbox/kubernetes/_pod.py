"""Sandbox pods as plain data: the manifest of a sandbox, and what a pod status means.

Everything here is pure (dicts in, dicts out), so the manifest can be validated against the
Kubernetes schemas and the status rules tested without a cluster.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from dataspace.sandbox.base import OUTPUT_DIR, TMP_DIR, WORKSPACE_DIR, Limits

LABEL_PREFIX = "dataspace.io/"
SANDBOX_ID_ANNOTATION = "dataspace.io/sandbox-id"
LABELS_ANNOTATION = "dataspace.io/labels"
COMPONENT_LABELS = {
    "app.kubernetes.io/name": "dataspace",
    "app.kubernetes.io/component": "sandbox",
    "app.kubernetes.io/managed-by": "dataspace",
}
MAIN_CONTAINER = "sandbox"
STAGE_CONTAINER = "stage"
LOG_SLACK_BYTES = 64 * 1024**2
"""Ephemeral storage kept for container logs and the (read-only) root layer's metadata."""

_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_NAME_PART_RE = re.compile(r"[^a-z0-9-]+")

#: Container waiting reasons that will not fix themselves.
FATAL_WAITING = frozenset(
    {
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
        "CrashLoopBackOff",
    }
)

PodKind = Literal[
    "pending",
    "stageable",
    "ready",
    "deadline",
    "oom",
    "storage_limit",
    "evicted",
    "image_error",
    "failed",
    "gone",
]


# ---- names, labels, quantities -------------------------------------------------------------


def label_value(value: str) -> str:
    """A valid Kubernetes label value for ``value`` (kept as is when already valid).

    Invalid characters become ``-`` and a short hash keeps distinct values distinct, so a
    sweep by run id computes the same label the pods carry.

    >>> label_value("task_12")
    'task_12'
    >>> label_value("gpt-5@high")
    'gpt-5-high-6bc85398'
    >>> len(label_value("x" * 100))
    63
    """
    if len(value) <= 63 and _LABEL_VALUE_RE.match(value):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:8]
    cleaned = re.sub(r"[^-A-Za-z0-9_.]+", "-", value)[:54].strip("-_.")
    return f"{cleaned}-{digest}" if cleaned else digest


def pod_name(labels: Mapping[str, str], suffix: str) -> str:
    """A DNS-1123 pod name (at most 63 characters) readable by a person.

    >>> pod_name({"run": "Bench_1", "task": "task_7", "attempt": "2"}, "x1y2z3")
    'ds-bench-1-task-7-a2-x1y2z3'
    """
    parts = []
    for key in ("run", "task"):
        part = _NAME_PART_RE.sub("-", labels.get(key, "").lower()).strip("-")
        if part:
            parts.append(part[:20].strip("-"))
    if labels.get("attempt"):
        parts.append("a" + _NAME_PART_RE.sub("", labels["attempt"].lower())[:4])
    return "-".join(["ds", *parts, suffix])[:63].strip("-")


def pod_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Kubernetes labels of a sandbox pod: the component labels plus ``dataspace.io/<key>``.

    >>> pod_labels({"run": "r1"})["dataspace.io/run"]
    'r1'
    """
    out = dict(COMPONENT_LABELS)
    for key, value in labels.items():
        safe_key = re.sub(r"[^-A-Za-z0-9_.]+", "-", key)[:63].strip("-_.") or "label"
        out[LABEL_PREFIX + safe_key] = label_value(str(value))
    return out


def selector(labels: Mapping[str, str]) -> str:
    """The label selector of the sandbox pods matching ``labels`` (all pods when empty).

    >>> selector({"run": "r1"})
    'app.kubernetes.io/component=sandbox,app.kubernetes.io/managed-by=dataspace,dataspace.io/run=r1'
    """
    pairs = {
        "app.kubernetes.io/component": "sandbox",
        "app.kubernetes.io/managed-by": "dataspace",
    }
    for key, value in pod_labels(labels).items():
        if key.startswith(LABEL_PREFIX):
            pairs[key] = value
    return ",".join(f"{k}={v}" for k, v in pairs.items())


def cpu_quantity(cpus: float) -> str:
    """CPUs as a Kubernetes quantity.

    >>> cpu_quantity(2.0), cpu_quantity(0.5), cpu_quantity(1.25)
    ('2', '500m', '1250m')
    """
    milli = max(1, round(cpus * 1000))
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def bytes_quantity(size: int) -> str:
    """Bytes as a Kubernetes quantity, binary suffixes when exact.

    >>> bytes_quantity(2 * 1024**3), bytes_quantity(512 * 1024**2), bytes_quantity(1000)
    ('2Gi', '512Mi', '1000')
    """
    for suffix, unit in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2), ("Ki", 1024)):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(int(size))


_QUANTITY_SUFFIXES: dict[str, Fraction] = {
    **{s: Fraction(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
    **{s: Fraction(1000**i) for i, s in enumerate(("k", "M", "G", "T", "P", "E"), 1)},
    "m": Fraction(1, 1000),
    "u": Fraction(1, 10**6),
    "n": Fraction(1, 10**9),
}


def parse_quantity(text: object) -> Fraction:
    """A Kubernetes quantity as an exact number (cores for CPU, bytes for sizes).

    >>> parse_quantity("500m"), parse_quantity("2Gi") == 2 * 1024**3, parse_quantity(3)
    (Fraction(1, 2), True, Fraction(3, 1))
    """
    s = str(text).strip()
    for suffix in sorted(_QUANTITY_SUFFIXES, key=len, reverse=True):
        if s.endswith(suffix):
            return Fraction(s[: -len(suffix)]) * _QUANTITY_SUFFIXES[suffix]
    return Fraction(s)


# ---- the manifest --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class VolumeWorkspace:
    """The workspace is a folder of a shared volume (a cache filled by the controller).

    Attributes:
        volume: a Kubernetes volume source, e.g. ``{"persistentVolumeClaim": {...}}``.
        sub_path: the workspace folder inside that volume.
        node: pin the pod to this node (a node-local cache such as ``hostPath``).
    """

    volume: Mapping[str, Any]
    sub_path: str
    node: str | None = None


@dataclass(frozen=True, kw_only=True)
class StreamedWorkspace:
    """The workspace is streamed by the controller into an ``emptyDir`` through exec.

    A staging init container holds the folder writable until the archive is unpacked;
    the sandbox container then mounts it read-only.
    """

    size_bytes: int
    stage_timeout: float = 600.0


_FROM_OPTIONS = (
    "namespace",
    "image",
    "deadline_grace",
    "tmp_medium",
    "image_pull_policy",
    "node_selector",
    "tolerations",
    "runtime_class",
    "priority_class",
    "image_pull_secrets",
    "host_users",
    "seccomp_profile",
)
"""The fields of a pod template that are the backend's options of the same name."""


@dataclass(frozen=True, kw_only=True)
class PodTemplate:
    """Everything of a sandbox pod that does not come from the sandbox spec.

    Made by :meth:`from_options`: the fields named as the backend's options take their
    values (and defaults) from ``KubernetesOptions``.

    Attributes:
        namespace: the sandbox namespace.
        image: default runtime image.
        helper_argv: the argv prefix that runs the in-pod helper (``python3 -c ...``).
        uid: user and group id of the sandbox processes.
        deadline_grace: seconds added to the sandbox wall clock for
            ``activeDeadlineSeconds`` (the controller enforces the wall clock itself and
            needs the pod alive afterwards to collect outputs).
        tmp_medium: ``""`` (node disk) or ``"Memory"`` (tmpfs, counted as memory).
        node_selector, tolerations, runtime_class, priority_class, image_pull_secrets,
        extra_annotations: passed through to the pod.
        host_users: ``False`` sets ``hostUsers: false`` (a user namespace per pod).
        seccomp_profile: a ``Localhost`` profile instead of ``RuntimeDefault``.
    """

    namespace: str
    image: str
    helper_argv: Sequence[str]
    uid: int
    deadline_grace: float
    tmp_medium: str
    image_pull_policy: str
    node_selector: Mapping[str, str]
    tolerations: Sequence[Mapping[str, Any]]
    runtime_class: str | None
    priority_class: str | None
    image_pull_secrets: Sequence[str]
    host_users: bool | None
    seccomp_profile: str | None
    extra_annotations: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(
        cls,
        options: Any,
        *,
        helper_argv: Sequence[str],
        uid: int,
        extra_annotations: Mapping[str, str] | None = None,
    ) -> PodTemplate:
        """The template of the backend's ``options`` (a ``KubernetesOptions``)."""
        return cls(
            helper_argv=helper_argv,
            uid=uid,
            extra_annotations=dict(extra_annotations or {}),
            **{name: getattr(options, name) for name in _FROM_OPTIONS},
        )


def pod_manifest(
    *,
    template: PodTemplate,
    name: str,
    sandbox_id: str,
    labels: Mapping[str, str],
    limits: Limits,
    workspace: VolumeWorkspace | StreamedWorkspace,
    image: str | None = None,
) -> dict[str, Any]:
    """The Pod object of one sandbox (requests equal limits, locked down, labelled)."""
    staged = workspace.size_bytes if isinstance(workspace, StreamedWorkspace) else 0
    storage = limits.output_bytes + staged + LOG_SLACK_BYTES
    if template.tmp_medium != "Memory":
        storage += limits.tmp_bytes
    resources = {
        "cpu": cpu_quantity(limits.cpus),
        "memory": bytes_quantity(limits.memory_bytes),
        "ephemeral-storage": bytes_quantity(storage),
    }
    seccomp: dict[str, str] = {"type": "RuntimeDefault"}
    if template.seccomp_profile:
        seccomp = {"type": "Localhost", "localhostProfile": template.seccomp_profile}
    container_security = {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": template.uid,
        "runAsGroup": template.uid,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": dict(seccomp),
    }
    tmp_dir: dict[str, Any] = {"sizeLimit": bytes_quantity(limits.tmp_bytes)}
    if template.tmp_medium:
        tmp_dir["medium"] = template.tmp_medium
    volumes: list[dict[str, Any]] = [
        {"name": "output", "emptyDir": {"sizeLimit": bytes_quantity(limits.output_bytes)}},
        {"name": "tmp", "emptyDir": tmp_dir},
    ]
    workspace_mount: dict[str, Any] = {
        "name": "workspace",
        "mountPath": WORKSPACE_DIR,
        "readOnly": True,
    }
    if isinstance(workspace, VolumeWorkspace):
        volumes.append({"name": "workspace", **dict(workspace.volume)})
        if workspace.sub_path:
            workspace_mount["subPath"] = workspace.sub_path
    else:
        size = bytes_quantity(max(workspace.size_bytes, 1024**2) + 1024**2)
        volumes.append({"name": "workspace", "emptyDir": {"sizeLimit": size}})
    main: dict[str, Any] = {
        "name": MAIN_CONTAINER,
        "image": image or template.image,
        "imagePullPolicy": template.image_pull_policy,
        "command": [*template.helper_argv, "init"],
        "workingDir": OUTPUT_DIR,
        "env": [
            {"name": "HOME", "value": TMP_DIR},
            {"name": "TMPDIR", "value": TMP_DIR},
            {"name": "LANG", "value": "C.UTF-8"},
        ],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": container_security,
        "volumeMounts": [
            workspace_mount,
            {"name": "output", "mountPath": OUTPUT_DIR},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    labels_json = json.dumps(dict(labels), sort_keys=True, ensure_ascii=False)
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": max(1, int(limits.wall_seconds + template.deadline_grace)),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "hostPID": False,
        "hostIPC": False,
        "shareProcessNamespace": False,
        "terminationGracePeriodSeconds": 1,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": template.uid,
            "runAsGroup": template.uid,
            "fsGroup": template.uid,
            "seccompProfile": dict(seccomp),
        },
        "containers": [main],
        "volumes": volumes,
    }
    if isinstance(workspace, StreamedWorkspace):
        spec["initContainers"] = [
            {
                "name": STAGE_CONTAINER,
                "image": image or template.image,
                "imagePullPolicy": template.image_pull_policy,
                "command": [*template.helper_argv, "stage-wait", _stage_wait_arg(workspace)],
                "resources": {"requests": dict(resources), "limits": dict(resources)},
                "securityContext": container_security,
                "volumeMounts": [
                    {"name": "workspace", "mountPath": WORKSPACE_DIR},
                    {"name": "stage", "mountPath": "/stage"},
                ],
            }
        ]
        volumes.append({"name": "stage", "emptyDir": {"sizeLimit": "1Mi"}})
    node_selector = dict(template.node_selector)
    if isinstance(workspace, VolumeWorkspace) and workspace.node:
        node_selector["kubernetes.io/hostname"] = workspace.node
    if node_selector:
        spec["nodeSelector"] = node_selector
    if template.tolerations:
        spec["tolerations"] = [dict(t) for t in template.tolerations]
    if template.host_users is not None:
        spec["hostUsers"] = template.host_users
    if template.runtime_class:
        spec["runtimeClassName"] = template.runtime_class
    if template.priority_class:
        spec["priorityClassName"] = template.priority_class
    if template.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in template.image_pull_secrets]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": template.namespace,
            "labels": pod_labels(labels),
            "annotations": {
                **dict(template.extra_annotations),
                SANDBOX_ID_ANNOTATION: sandbox_id,
                LABELS_ANNOTATION: labels_json,
            },
        },
        "spec": spec,
    }


def _stage_wait_arg(workspace: StreamedWorkspace) -> str:
    import base64

    return base64.b64encode(json.dumps({"timeout": workspace.stage_timeout}).encode()).decode()


# ---- reading a pod's status ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class PodState:
    """What a pod's status means for its sandbox.

    ``kind``: ``pending`` (not running yet), ``stageable`` (the staging init container is
    up), ``ready``, and the ends: ``deadline`` (activeDeadlineSeconds), ``oom`` (the
    container was OOM-killed), ``storage_limit`` (evicted for exceeding its own ephemeral
    storage or emptyDir limit), which are resource outcomes of the agent; ``evicted``
    (node pressure, preemption), ``image_error``, ``failed`` and ``gone``, which are
    infrastructure failures.
    """

    kind: PodKind
    reason: str = ""
    message: str = ""
    node: str | None = None
    phase: str = ""

    @property
    def settled(self) -> bool:
        """Whether this is the pod's last word: its phase is final, or it is gone.

        The kubelet kills containers first and writes the phase about a second later, so
        a pod whose containers ended while its phase still says Running has not settled.
        """
        return self.kind == "gone" or self.phase in ("Failed", "Succeeded", "Unknown")

    @property
    def terminal(self) -> bool:
        """Whether the pod can no longer run commands."""
        return self.kind not in ("pending", "stageable", "ready")

    @property
    def infrastructure(self) -> bool:
        """Whether this end is a fault outside the agent's control (retried)."""
        return self.kind in ("evicted", "image_error", "failed", "gone")


def classify_pod(pod: Mapping[str, Any] | None) -> PodState:
    """Read a pod object (as the API returns it) into a ``PodState``.

    >>> classify_pod({"status": {"phase": "Failed", "reason": "DeadlineExceeded"}}).kind
    'deadline'
    >>> classify_pod({"status": {"phase": "Failed", "reason": "Evicted",
    ...     "message": "The node was low on resource: memory."}}).kind
    'evicted'
    >>> classify_pod({"status": {"phase": "Pending", "containerStatuses": [{"name": "sandbox",
    ...     "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}).kind
    'image_error'
    >>> classify_pod(None).kind
    'gone'
    >>> ended = classify_pod({"status": {"phase": "Running", "containerStatuses": [
    ...     {"name": "sandbox", "state": {"terminated": {"exitCode": 0}}}]}})
    >>> ended.kind, ended.settled
    ('failed', False)
    """
    state = _classify(pod)
    phase = ((pod or {}).get("status") or {}).get("phase") or ""
    return dataclasses.replace(state, phase=phase) if pod is not None else state


def _classify(pod: Mapping[str, Any] | None) -> PodState:
    if pod is None:
        return PodState(kind="gone", reason="NotFound", message="the pod no longer exists")
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    node = spec.get("nodeName")
    phase = status.get("phase") or "Pending"
    reason = status.get("reason") or ""
    message = status.get("message") or ""
    containers = status.get("containerStatuses") or []
    inits = status.get("initContainerStatuses") or []
    terminated = [
        (
            c.get("name"),
            (c.get("state") or {}).get("terminated")
            or (c.get("lastState") or {}).get("terminated"),
        )
        for c in containers
    ]
    if phase == "Failed" or any(t for _, t in terminated):
        if reason == "DeadlineExceeded":
            return PodState(kind="deadline", reason=reason, message=message, node=node)
        if reason == "Evicted":
            kind: PodKind = "storage_limit" if _own_storage_limit(message) else "evicted"
            return PodState(kind=kind, reason=reason, message=message, node=node)
        for name, term in terminated:
            if term and term.get("reason") == "OOMKilled":
                return PodState(
                    kind="oom",
                    reason="OOMKilled",
                    node=node,
                    message=f"container {name} was killed for memory (exit {term.get('exitCode')})",
                )
        for name, term in terminated:
            if term:
                why = term.get("reason") or reason or "Error"
                return PodState(
                    kind="failed",
                    reason=why,
                    node=node,
                    message=message
                    or f"container {name} exited with "
                    f"{term.get('exitCode')}: {term.get('message') or why}",
                )
        return PodState(kind="failed", reason=reason or "Failed", message=message, node=node)
    if phase == "Succeeded":
        return PodState(
            kind="failed", reason="Completed", node=node, message="the sandbox container exited"
        )
    if phase == "Unknown":
        return PodState(kind="gone", reason=reason or "NodeLost", message=message, node=node)
    if meta.get("deletionTimestamp"):
        return PodState(
            kind="gone", reason="Terminating", message="the pod is being deleted", node=node
        )
    for c in [*inits, *containers]:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FATAL_WAITING:
            return PodState(
                kind="image_error" if "Image" in waiting["reason"] else "failed",
                reason=waiting["reason"],
                node=node,
                message=f"container {c.get('name')}: {waiting.get('message') or waiting['reason']}",
            )
    for c in inits:
        term = (c.get("state") or {}).get("terminated")
        if term and term.get("exitCode") not in (0, None):
            return PodState(
                kind="failed",
                reason="StagingFailed",
                node=node,
                message=f"init container {c.get('name')} exited with "
                f"{term.get('exitCode')}: {term.get('message') or ''}".strip(),
            )
    if phase == "Running" and _condition(status, "Ready"):
        return PodState(kind="ready", node=node)
    for c in inits:
        if c.get("name") == STAGE_CONTAINER and (c.get("state") or {}).get("running"):
            return PodState(kind="stageable", node=node)
    pending_why = ""
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            pending_why = f"{cond.get('reason')}: {cond.get('message')}"
    return PodState(kind="pending", reason=reason, message=pending_why or message, node=node)


def _condition(status: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or []
    )


def _own_storage_limit(message: str) -> bool:
    """Whether an eviction message blames the pod's own storage limits (not the node).

    >>> _own_storage_limit("Usage of EmptyDir volume 'output' exceeds the limit '1Gi'.")
    True
    >>> _own_storage_limit("Pod ephemeral local storage usage exceeds the total limit 2Gi.")
    True
    >>> _own_storage_limit('Container sandbox exceeded its local ephemeral storage limit "1Gi". ')
    True
    >>> _own_storage_limit("The node was low on resource: ephemeral-storage.")
    False
    """
    lowered = message.lower()
    if "exceeded its local ephemeral storage limit" in lowered:
        return True
    return "exceeds the" in lowered and ("emptydir" in lowered or "ephemeral" in lowered)


def _when(event: Mapping[str, Any]) -> str:
    return str(
        event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp") or ""
    )


def ending_from_events(events: Sequence[Mapping[str, Any]]) -> PodState | None:
    """The end a pod's Warning events announce before its phase does, if any.

    The kubelet records ``DeadlineExceeded`` or ``Evicted`` as it kills the containers; the
    pod's phase follows later. None when no such event is there.

    >>> ending_from_events([{"type": "Warning", "reason": "DeadlineExceeded",
    ...     "message": "Pod was active on the node longer than the specified deadline"}]).kind
    'deadline'
    >>> ending_from_events([{"type": "Warning", "reason": "Evicted",
    ...     "message": 'Usage of EmptyDir volume "output" exceeds the limit "64Mi". '}]).kind
    'storage_limit'
    >>> ending_from_events([{"type": "Normal", "reason": "Started", "message": ""}]) is None
    True
    """
    for event in sorted(events, key=_when, reverse=True):
        if event.get("type") != "Warning":
            continue
        reason, message = str(event.get("reason") or ""), str(event.get("message") or "")
        if reason == "DeadlineExceeded":
            return PodState(kind="deadline", reason=reason, message=message)
        if reason == "Evicted":
            kind: PodKind = "storage_limit" if _own_storage_limit(message) else "evicted"
            return PodState(kind=kind, reason=reason, message=message)
    return None


@dataclass(frozen=True, kw_only=True)
class PendingCause:
    """Why a pod is not ready yet, as its newest event (a Warning) says.

    ``code`` is the error code a start that fails for it carries: ``pod_unschedulable``
    (no node has room for the pod's requests; this may pass as other pods end),
    ``image_pull``, or ``pod_start_failed`` (what does not fix itself: a sandbox the runtime
    cannot create, a volume or claim that is missing).
    """

    reason: str
    message: str
    code: str

    @property
    def waits_for_capacity(self) -> bool:
        """Whether the pod waits for room on a node (other pods ending may give it)."""
        return self.code == "pod_unschedulable"

    def __str__(self) -> str:
        return f"{self.reason}: {self.message.strip()}"


def pending_cause(events: Sequence[Mapping[str, Any]]) -> PendingCause | None:
    """The cause a not-ready pod's newest event gives, when that event is a Warning.

    >>> pending_cause([{"type": "Warning", "reason": "FailedScheduling",
    ...     "message": "0/1 nodes are available: 1 Insufficient cpu."}]).code
    'pod_unschedulable'
    >>> pending_cause([{"type": "Warning", "reason": "FailedScheduling", "message":
    ...     '0/1 nodes are available: persistentvolumeclaim "ws" not found.'}]).code
    'pod_start_failed'
    >>> str(pending_cause([{"type": "Warning", "reason": "FailedCreatePodSandBox",
    ...     "message": "Failed to create pod sandbox: runtime does not support user namespaces"}]))
    'FailedCreatePodSandBox: Failed to create pod sandbox: runtime does not support user namespaces'
    >>> pending_cause([{"type": "Warning", "reason": "FailedScheduling", "message": "x",
    ...     "lastTimestamp": "2026-01-01T00:00:00Z"}, {"type": "Normal", "reason": "Scheduled",
    ...     "message": "y", "lastTimestamp": "2026-01-01T00:00:01Z"}]) is None
    True
    """
    if not events:
        return None
    newest = sorted(events, key=_when)[-1]
    if newest.get("type") != "Warning":
        return None
    reason, message = str(newest.get("reason") or ""), str(newest.get("message") or "")
    lowered = message.lower()
    if reason == "FailedScheduling" and "not found" not in lowered:
        code = "pod_unschedulable"
    elif "image" in lowered and reason in ("Failed", "BackOff", "InspectFailed"):
        code = "image_pull"
    else:
        code = "pod_start_failed"
    return PendingCause(reason=reason, message=message, code=code)


def format_events(events: Sequence[Mapping[str, Any]], limit: int = 8) -> str:
    """The last ``limit`` events of a pod, one ``Reason: message`` per line.

    >>> format_events([{"reason": "Scheduled", "message": "assigned to n1", "type": "Normal"}])
    'Normal Scheduled: assigned to n1'
    """
    ordered = sorted(events, key=_when)[-limit:]
    lines = []
    for e in ordered:
        count = e.get("count") or 1
        times = f" (x{count})" if count > 1 else ""
        lines.append(f"{e.get('type', 'Normal')} {e.get('reason')}: {e.get('message')}{times}")
    return "\n".join(lines)


__all__ = [
    "LABELS_ANNOTATION",
    "MAIN_CONTAINER",
    "SANDBOX_ID_ANNOTATION",
    "STAGE_CONTAINER",
    "PendingCause",
    "PodState",
    "PodTemplate",
    "StreamedWorkspace",
    "VolumeWorkspace",
    "bytes_quantity",
    "classify_pod",
    "cpu_quantity",
    "ending_from_events",
    "format_events",
    "label_value",
    "pending_cause",
    "pod_labels",
    "pod_manifest",
    "pod_name",
    "selector",
]
