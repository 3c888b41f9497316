"""Options of the ``kubernetes`` sandbox backend and its infrastructure error."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dataspace.errors import ConfigError, SandboxError
from dataspace.sandbox.kubernetes._api import ClientSettings, Retries
from dataspace.store.retry import Backoff

DEFAULT_IMAGE = "ghcr.io/dataspace-bench/runtime:1.0.0"
DEFAULT_NAMESPACE = "dataspace-sandboxes"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UID_BASE = 200_000
UID_SPAN = 100_000
RELAY_PORTS = tuple(range(20100, 20132))
"""The controller ports a native harness's relay may listen on (one per attempt a
controller runs at once); the NetworkPolicies of ``k8s/base/harness-relay.yaml`` allow
sandbox pods labelled ``dataspace.io/native-harness`` exactly these ports of the controller
pods, listed one by one rather than as a range with ``endPort``, which some CNIs ignore
(they would open the first port alone). They lie outside every range Ray listens in
(worker ports 10002-19999, the kernel's ephemeral ports from 32768), so no Ray port of a
controller is ever reachable from a sandbox."""


class PodFailedError(SandboxError):
    """A sandbox pod failed for reasons outside the agent's control (retried).

    Attributes:
        code: ``pod_pending_timeout``, ``pod_unschedulable`` (no room on a node past
            ``unschedulable_timeout``), ``pod_start_failed`` (a Warning such as
            ``FailedCreatePodSandBox`` or a missing claim past ``start_warning_timeout``),
            ``image_pull``, ``pod_evicted``, ``pod_failed``, ``pod_gone``, ``staging``,
            ``k8s_api``, ``slots``, ``runtime_manifest`` (the image holds no readable Data
            Workbench Runtime manifest), ``quota`` (the namespace's ResourceQuota never made
            room, or can never hold the pod), ``pod_security`` or ``admission`` (the pod is
            refused: a bad sandbox spec).
        pod: the pod name (may be empty when creation never got that far).
        events: the pod's recent events, one per line.
    """

    def __init__(self, message: str, *, code: str, pod: str = "", events: str = "") -> None:
        self.code = code
        self.pod = pod
        self.events = events
        text = f"{message} [{code}]"
        if events:
            text += "; events: " + " | ".join(events.splitlines())
        super().__init__(text)


@dataclass(frozen=True, kw_only=True)
class KubernetesOptions:
    """Options of the backend (the run spec's ``sandbox.options``).

    Attributes:
        namespace: where sandbox pods live.
        image: runtime image (a run spec's ``sandbox.image`` overrides it).
        api_host, kubeconfig, context, in_cluster: how to reach the API server (see
            ``ClientSettings``); default: in-cluster config inside a pod, else kubeconfig.
        ready_timeout: seconds a pod may take to become ready (scheduling, image pull,
            staging included).
        stage_timeout: seconds the staging init container waits for the workspace.
        max_pending: pods being created at once (held until Ready).
        max_deleting: pod deletions in flight at once.
        slots: ``auto`` (cluster-wide inside Ray, else per process), ``ray`` or ``thread``.
        workspace_volume: how workspaces reach pods (``_staging.py``): ``auto`` (the
            default: the claim of the sandbox namespace labelled
            ``dataspace.io/workspace-cache: "true"`` when there is one and the controller
            sees its folder, else streamed), the name of a PersistentVolumeClaim there
            (mounted read-only), a volume source (``{"nfs": {...}}``, ``{"hostPath":
            {...}}``), or ``stream`` (a tar over exec through the API server; also None).
        workspace_cache_dir: where the controller sees that volume (for a claim, unless its
            ``dataspace.io/controller-path`` annotation says), or, for streaming, its local
            cache folder.
        pin_to_node: schedule pods on the controller's node (default: with ``hostPath``).
        node_name: the controller's node (default: ``$NODE_NAME``).
        uid: the sandbox user; None picks one per pod (so ``RLIMIT_NPROC`` is per pod).
        deadline_grace: seconds past the wall clock before ``activeDeadlineSeconds``.
        tmp_medium: ``""`` (disk) or ``"Memory"`` for /tmp.
        image_pull_policy, node_selector, tolerations, runtime_class, priority_class,
        image_pull_secrets: passed to the pod.
        api_retries: tries of each API call; api_backoff_base: first backoff delay.
        api_retry_window: seconds during which connection errors, 5xx and 429 answers
            are retried past ``api_retries`` (an API server restart drains for about a
            minute); 0: ``api_retries`` alone.
        quota_timeout: seconds a pod creation refused for the namespace's ResourceQuota
            waits for room (retried with backoff, as capacity: not a failure) before the
            attempt fails with ``quota``.
        preflight_pull_timeout: seconds preflight's one-off pod may take to pull an image
            no node holds yet.
        image_wait: seconds a run waits, before its first attempt, until every schedulable
            node lists the runtime image (pulled by the pre-pull DaemonSet); past it the
            run stops with the nodes still without it. 0: attempts start at once.
        image_poll: seconds between reads of the nodes while waiting.
        max_output_bytes: stdout and stderr kept per command.
        host_users: ``False`` gives each pod its own user namespace (``hostUsers: false``,
            Kubernetes 1.33+ or the ``UserNamespacesSupport`` gate); None leaves the
            field out, for clusters without it.
        seccomp_profile: a ``Localhost`` seccomp profile (a path under the kubelet's
            seccomp folder, e.g. ``dataspace-sandbox.json`` from ``k8s/seccomp/``) in
            place of ``RuntimeDefault``.
        python: the interpreter that runs the helper in the image.
        path: ``PATH`` of sandbox commands (the image's tools).
        relay_address: the address sandbox pods dial to reach this controller's relays
            (native harnesses); default ``$POD_IP`` (the downward API's ``status.podIP``,
            set by ``k8s/base/raycluster.yaml``).
        relay_bind: where those relays listen on the controller; default
            ``relay_address``.
        relay_ports: the ports the relays listen on, a list (``[20100, 20101]``) or a
            range ``"20100-20131"``; they must be the ports the NetworkPolicies list
            (``k8s/base/harness-relay.yaml``).
        settle_timeout: seconds the pod is read again after a broken exec until its phase
            settles (the kubelet kills containers first and reports the phase later).
        start_warning_timeout: seconds a not-ready pod may show a Warning as its newest
            event (a sandbox the runtime cannot create, a missing volume or claim) before
            its start fails with that reason and message.
        unschedulable_timeout: the same for ``FailedScheduling`` for want of room on a
            node, which other pods ending may give.
    """

    namespace: str = DEFAULT_NAMESPACE
    image: str = DEFAULT_IMAGE
    api_host: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    ready_timeout: float = 300.0
    stage_timeout: float = 600.0
    max_pending: int = 16
    max_deleting: int = 16
    slots: str = "auto"
    workspace_volume: Mapping[str, Any] | str | None = "auto"
    workspace_cache_dir: str | None = None
    pin_to_node: bool | None = None
    node_name: str | None = None
    uid: int | None = None
    deadline_grace: float = 300.0
    tmp_medium: str = ""
    image_pull_policy: str = "IfNotPresent"
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    runtime_class: str | None = None
    priority_class: str | None = None
    image_pull_secrets: Sequence[str] = ()
    api_retries: int = 5
    api_backoff_base: float = 0.2
    api_retry_window: float = 120.0
    quota_timeout: float = 6 * 3600.0
    preflight_pull_timeout: float = 120.0
    image_wait: float = 600.0
    image_poll: float = 5.0
    max_output_bytes: int = 8 * 1024**2
    host_users: bool | None = None
    seccomp_profile: str | None = None
    python: str = "python3"
    path: str = BASE_PATH
    relay_address: str | None = None
    relay_bind: str | None = None
    relay_ports: tuple[int, ...] = RELAY_PORTS
    settle_timeout: float = 15.0
    start_warning_timeout: float = 10.0
    unschedulable_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.max_pending < 1 or self.max_deleting < 1:
            raise ValueError("max_pending and max_deleting must be at least 1")
        if self.ready_timeout <= 0:
            raise ValueError("ready_timeout must be positive")
        if self.api_retry_window < 0 or self.quota_timeout < 0:
            raise ValueError("api_retry_window and quota_timeout must not be negative")
        if self.slots not in ("auto", "ray", "thread"):
            raise ValueError(f"slots must be auto, ray or thread, got {self.slots!r}")
        if self.tmp_medium not in ("", "Memory"):
            raise ValueError(f"tmp_medium must be '' or 'Memory', got {self.tmp_medium!r}")
        ports = self.relay_ports
        if (
            not ports
            or not all(isinstance(p, int) and 0 < p < 65536 for p in ports)
            or len(set(ports)) != len(ports)
        ):
            raise ValueError(
                f"relay_ports must be distinct ports (a list, or a range like "
                f'"20100-20131"), got {ports!r}'
            )
        volume = self.workspace_volume
        if isinstance(volume, Mapping) and not self.workspace_cache_dir:
            raise ValueError(
                "workspace_volume needs workspace_cache_dir (where the "
                "controller mounts the same volume)"
            )
        if not (volume is None or isinstance(volume, (str, Mapping))) or volume == "":
            raise ValueError(
                "workspace_volume must be auto, stream, the name of a claim in the sandbox "
                f"namespace or a volume source, got {volume!r}"
            )
        if self.image_wait < 0 or self.image_poll <= 0:
            raise ValueError("image_wait must not be negative and image_poll must be positive")

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> KubernetesOptions:
        """Validate keyword options; unknown names or bad values are one-line ConfigErrors."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigError(
                f"kubernetes sandbox backend: unknown option(s) "
                f"{', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        values = dict(options)
        for key in ("tolerations", "image_pull_secrets", "relay_ports"):
            if key in values and values[key] is not None:
                values[key] = tuple(values[key])
        ports = options.get("relay_ports")
        if isinstance(ports, str):
            values["relay_ports"] = _port_range(ports)
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"kubernetes sandbox backend: {exc}") from exc

    @property
    def client_settings(self) -> ClientSettings:
        """How to reach the API server."""
        return ClientSettings(
            api_host=self.api_host,
            kubeconfig=self.kubeconfig,
            context=self.context,
            in_cluster=self.in_cluster,
        )

    @property
    def backoff(self) -> Backoff:
        """Retry policy of API calls."""
        return Backoff(attempts=self.api_retries, base=self.api_backoff_base, cap=5.0)

    @property
    def retries(self) -> Retries:
        """How long transient API failures are retried (``api_retry_window``)."""
        return Retries(backoff=self.backoff, window=self.api_retry_window)


def _port_range(text: str) -> tuple[int, ...]:
    """``"20100-20131"`` as its ports (a ConfigError when it is not a range).

    >>> _port_range("20100-20102")
    (20100, 20101, 20102)
    """
    lo, sep, hi = text.partition("-")
    try:
        ports = tuple(range(int(lo), int(hi) + 1)) if sep else (int(lo),)
    except ValueError:
        raise ConfigError(
            f'kubernetes sandbox backend: relay_ports {text!r} is not a range like "20100-20131"'
        ) from None
    return ports


__all__ = [
    "BASE_PATH",
    "DEFAULT_IMAGE",
    "DEFAULT_NAMESPACE",
    "RELAY_PORTS",
    "UID_BASE",
    "UID_SPAN",
    "KubernetesOptions",
    "PodFailedError",
]
