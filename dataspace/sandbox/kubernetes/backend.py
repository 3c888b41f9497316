"""The ``kubernetes`` sandbox backend: one locked-down pod per attempt.

Design
------
**A pod per sandbox.** ``create`` makes one pod from a fixed template (``_pod.py``):
requests equal limits for CPU, memory and ephemeral storage (so the pod is Guaranteed and
its output and tmp ``emptyDir`` volumes are size-limited), ``activeDeadlineSeconds`` as a
backstop past the sandbox wall clock, ``restartPolicy: Never``, a non-root user, a
read-only root filesystem, every capability dropped, no privilege escalation, the runtime
default seccomp profile, no service-account token and no service links. Labels carry run,
agent, task and attempt (made label-safe; the exact values sit in an annotation), so
``sweep`` can delete every pod of a run. The sandbox namespace's NetworkPolicy
(``k8s/base/networkpolicies.yaml``) denies all egress and all ingress to these pods.

**Exec through the API server.** Commands, file reads and writes and output collection are
execs (the Kubernetes exec websocket) of a small helper (``_helper.py``, standard
library only) that travels compressed in the exec argv, so any image with ``python3`` works
and nothing listens inside the pod: a sandbox needs no ingress at all, not even from the
controller. The helper enforces the command timeout in the pod, kills everything the
command started, caps output, reports OOM kills from the container's memory cgroup and
never follows a symbolic link under ``/output``. The pod's own limits cover memory, CPU and
storage; ``pids`` is applied as ``RLIMIT_NPROC`` under a uid of the pod's own (and by the
kubelet's ``podPidsLimit`` where the cluster sets it).

**Staging with egress denied.** Pods never download anything. The controller (which can
reach the store) makes each workspace available in a cache folder it can write
(``staging.py``): a local folder is used in place or copied once (keyed by its
listing), a store URI such as ``s3://...`` is downloaded once (keyed by URI). Three ways
into the pod, by ``workspace_volume`` (``_staging.py``):

* a shared volume that the controllers also mount: by default (``auto``) the claim of the
  sandbox namespace labelled ``dataspace.io/workspace-cache: "true"``, or a named claim, or
  a volume source (e.g. ``nfs``): when the release itself lives there (``ray_jobs.run``
  syncs a store release into it once), the pod mounts its task's ``context`` folder
  read-only by ``subPath`` and nothing is copied at all; the whole benchmark crosses the
  network once;
* a node-local ``hostPath`` cache: the controller fills it once per workspace and node, and
  pods are pinned to the controller's node (``NODE_NAME``);
* streamed (``auto`` without such a claim, or ``stream``; any cluster): the controller
  streams a tar of the cached folder over exec into an ``emptyDir`` held by a staging init
  container; the sandbox container then mounts that folder read-only. The store is read
  once per controller node, the API server carries the tar per attempt.

**Cold pulls.** ``wait_ready`` (the contract's wait before fan-out) reads the nodes until
every schedulable one holds the runtime image, bounded by ``image_wait`` (``_prepull.py``).

**Concurrency.** Creation and deletion each have their own limit (``max_pending``,
``max_deleting``). A creation slot is held from the API call until the pod is ready or has
failed, so Pending pods only ever block other creations, never a ready sandbox; inside a
Ray job the slots are shared by the whole cluster through one named actor
(``_slots.py``).

**Runtime manifest.** Once the pod is ready the controller reads the image's
``/opt/dataspace/runtime-manifest.json`` (written by ``images/workbench_manifest.py`` when
``images/build.sh`` builds the image) through the helper, at most 1 MiB, parsed strictly;
its identity is the attempt record's ``runtime``, as with the local backend. An image
without a readable manifest fails the sandbox (``runtime_manifest``).

**Native harnesses** (``SandboxSpec.relay_network``). A Unix socket cannot cross pods, so
the pod of a native-harness attempt is labelled ``dataspace.io/native-harness: "true"``,
which the NetworkPolicies of ``k8s/base/harness-relay.yaml`` let open TCP to the
controller pods' relay ports (``relay_ports``) and nothing else (no DNS, no other pod, no
outside address); ``info()["relay"]`` tells the harness's runner where to listen
(``relay_bind``) and what the pod dials (``relay_address``, the controller's pod IP). The
relay accepts only the attempt's one-attempt token and holds the key: the pod never sees it.

**Failures.** Waiting for Ready has a timeout whose error carries the pod's events; a
Warning that is the pod's newest event (``FailedScheduling``, ``FailedCreatePodSandBox``, a
missing claim) is logged at once and ends the start with its reason and message once it
lasts. After a broken exec the pod is read until its phase settles (the kubelet kills the
containers first and reports the phase about a second later), its Warning events deciding
past ``settle_timeout``. Image
pull errors, evictions for node pressure, lost nodes, vanished pods and API failures past
retries raise ``PodFailedError`` (a ``SandboxError``, so the attempt is retried as an
infrastructure failure, labelled with ``code``). OOMKilled and evictions for exceeding the
pod's own storage limits end commands with status ``resource_limit``; the wall clock and
``activeDeadlineSeconds`` end them with ``deadline``: those are the agent's outcomes.
API refusals are named by cause (``_api.refusal_cause``): a full ResourceQuota is
capacity, the creation waits for room (``quota_timeout``; ``quota`` when the pod alone can
never fit); Pod Security and admission refusals are bad specs (``pod_security``,
``admission``); only other 403s get the RBAC hint. Connection errors and 5xx answers are
retried for ``api_retry_window`` seconds (an API server restart drains for about a
minute). ``preflight_checks`` tells what an attempt's pod will meet without running one
(``_preflight.py``).
"""

from __future__ import annotations

import dataclasses
import errno
import itertools
import logging
import os
import random
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dataspace.checks import one_line, timed
from dataspace.errors import ConfigError, DataSpaceError, SandboxClosedError, SandboxError
from dataspace.sandbox.base import (
    TMP_DIR,
    Check,
    ExecPlan,
    ExecResult,
    ExecStatus,
    Limits,
    PreflightRequest,
    Sandbox,
    SandboxBackend,
    SandboxSpec,
    exec_status,
)
from dataspace.sandbox.kubernetes._api import (
    ApiCallError,
    KubeApi,
    Retries,
    is_transient,
    kube_api,
    quota_never_fits,
)
from dataspace.sandbox.kubernetes._exec import ExecLostError, HelperReply, helper_argv, run_helper
from dataspace.sandbox.kubernetes._options import (
    BASE_PATH,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    RELAY_PORTS,
    UID_BASE,
    UID_SPAN,
    KubernetesOptions,
    PodFailedError,
)
from dataspace.sandbox.kubernetes._pod import (
    MAIN_CONTAINER,
    SANDBOX_ID_ANNOTATION,
    STAGE_CONTAINER,
    PendingCause,
    PodState,
    PodTemplate,
    StreamedWorkspace,
    VolumeWorkspace,
    classify_pod,
    ending_from_events,
    format_events,
    pending_cause,
    pod_manifest,
    pod_name,
    selector,
)
from dataspace.sandbox.kubernetes._preflight import ClusterCheck, cluster_checks
from dataspace.sandbox.kubernetes._prepull import wait_for_image
from dataspace.sandbox.kubernetes._slots import Slots, SlotTimeoutError, default_slots
from dataspace.sandbox.kubernetes._staging import Staging, resolve_staging
from dataspace.sandbox.staging import CachedWorkspace, WorkspaceCache, extract_outputs
from dataspace.store.retry import backoff_delay

logger = logging.getLogger(__name__)

RELAY_ADDRESS_FIX = (
    "a native harness needs the address sandbox pods dial to reach this controller: set "
    "sandbox.options.relay_address or $POD_IP (the downward API's status.podIP, as "
    "k8s/base/raycluster.yaml sets it)"
)
"""What to do when a native harness's relay has no address (preflight says it too)."""

PENDING_POLL = 2.0
"""Seconds between reads of a not-ready pod's events (its watch windows last as long)."""

NATIVE_HARNESS_LABEL = "native-harness"
"""The sandbox label (``dataspace.io/native-harness`` on the pod) that the NetworkPolicy
``native-harness-egress-to-relay`` selects."""


class KubernetesBackend(SandboxBackend):
    """Creates sandbox pods; ``sweep`` deletes every pod of a run.

    Args:
        **options: see ``KubernetesOptions``.
    """

    name = "kubernetes"
    relay_transport = "network"
    harnesses_from_host = False
    default_image = DEFAULT_IMAGE

    def __init__(self, **options: Any) -> None:
        self.options = KubernetesOptions.from_options(options)
        self._api: KubeApi | None = None
        self._slots: Slots | None = None

    @property
    def api(self) -> KubeApi:
        """The shared API client (created on first use)."""
        if self._api is None:
            self._api = kube_api(self.options.client_settings, self.options.retries)
        return self._api

    @property
    def slots(self) -> Slots:
        """The creation and deletion slot pools."""
        if self._slots is None:
            self._slots = default_slots(self.options.slots)
        return self._slots

    def staging(self) -> Staging:
        """How workspaces reach this backend's pods (``_staging.resolve_staging``).

        Raises:
            ConfigError: a named claim whose folder on the controller is not known.
        """
        return resolve_staging(self.options, self._preflight_api)

    def cache(self, staging: Staging | None = None) -> WorkspaceCache:
        """The workspace cache this backend stages through (on the volume for a volume)."""
        staging = staging or self.staging()
        root = staging.cache_dir or os.path.join(
            os.path.expanduser("~"), ".cache", "dataspace", "k8s-workspaces"
        )
        return WorkspaceCache(root)

    def create(self, spec: SandboxSpec) -> KubernetesSandbox:
        """Create a pod, stage the workspace, wait until it is ready.

        Raises:
            PodFailedError: the pod could not start (timeout, image pull, eviction, API).
            SandboxError: the workspace could not be staged.
        """
        return KubernetesSandbox(self, spec)

    def pod_template(self, uid: int) -> PodTemplate:
        """What every sandbox pod of this backend shares (``uid``: its sandbox user)."""
        opts = self.options
        return PodTemplate.from_options(
            opts,
            helper_argv=helper_argv(opts.python),
            uid=uid,
            extra_annotations={"dataspace.io/controller": socket.gethostname()},
        )

    def preflight_checks(
        self, *, image: str | None, limits: Limits, labels: Mapping[str, str]
    ) -> list[ClusterCheck]:
        """What an attempt's pod will meet, checked without running an attempt.

        The namespace exists; a server-side dry run of the exact pod an attempt creates
        (Pod Security, admission policies, quota) and its volume claim; the image is on a
        schedulable node or a one-off pod pulls it; the requests fit a node. API calls
        get ``api_retries`` tries, without the run's retry window.
        """
        try:
            manifest = self._probe_manifest(image=image, limits=limits, labels=labels)
        except ConfigError as exc:
            return [ClusterCheck(key="pod", ok=False, message=str(exc))]
        return cluster_checks(self._preflight_api(), self.options, manifest)

    def _probe_manifest(
        self, *, image: str | None, limits: Limits, labels: Mapping[str, str]
    ) -> dict[str, Any]:
        """The pod an attempt of the run creates (a stand-in workspace of 1 MiB).

        Raises:
            ConfigError: the pod cannot be made from the options.
        """
        opts = self.options
        sandbox_id = secrets.token_hex(6)
        labels = {**labels, "task": "preflight"}
        return pod_manifest(
            template=self.pod_template(opts.uid if opts.uid is not None else UID_BASE),
            name=pod_name(labels, sandbox_id),
            sandbox_id=sandbox_id,
            labels=labels,
            limits=limits,
            workspace=workspace_mount(opts, self.staging(), size_bytes=1024**2, sub_path=""),
            image=image,
        )

    def describe(self) -> str:
        """The namespace of this backend's pods."""
        return f"namespace {self.options.namespace}"

    def preflight(self, request: PreflightRequest) -> list[Check]:
        """The cluster answers; what an attempt's pod will meet; where relays are dialled.

        ``sandbox`` (one API call), then, when it passed, ``sandbox.staging`` (how
        workspaces reach pods: a volume, or streamed through the API server),
        ``sandbox.namespace``, ``sandbox.pod``, ``sandbox.volume``, ``sandbox.image`` and
        ``sandbox.resources`` (:meth:`preflight_checks`), then
        ``sandbox.options.relay_address`` for a run with native harnesses.
        """
        checks = [timed("sandbox", lambda: f"{self.name} backend: {self.check_cluster()}")]
        if checks[0].ok:
            checks.append(self._staging_check())
            checks += self._pod_checks(request)
        if request.relay:
            checks.append(self._relay_check(request))
        return checks

    def _pod_checks(self, request: PreflightRequest) -> list[Check]:
        t0 = time.monotonic()
        try:
            found = self.preflight_checks(
                image=request.image, limits=request.limits, labels=request.labels
            )
        except DataSpaceError as exc:
            return [Check(key="sandbox.pod", ok=False, message=one_line(str(exc)))]
        seconds = time.monotonic() - t0
        return [
            Check(
                key=f"sandbox.{c.key}",
                ok=c.ok,
                warning=c.warning,
                message=one_line(c.message),
                seconds=seconds,
            )
            for c in found
        ]

    def _staging_check(self) -> Check:
        """``sandbox.staging``: a volume the pods mount, or streamed through the API server."""

        def describe() -> tuple[str, bool]:
            staging = self.staging()
            return staging.describe(), staging.warning

        return timed("sandbox.staging", describe)

    def wait_ready(self, request: PreflightRequest, progress: Callable[[Check], None]) -> None:
        """Wait, up to ``image_wait`` seconds, until every schedulable node holds the image.

        See ``_prepull.py``: the pre-pull DaemonSet pulls it, this waits for it, so no
        attempt's pod starts on a node still pulling. Lines are ``sandbox.prepull``.

        Raises:
            SandboxError: nodes still lack the image after ``image_wait`` seconds.
        """
        opts = self.options
        manifest = self._probe_manifest(
            image=request.image, limits=request.limits, labels=request.labels
        )

        def show(found: ClusterCheck) -> None:
            progress(
                Check(
                    key=f"sandbox.{found.key}",
                    ok=found.ok,
                    warning=found.warning,
                    message=one_line(found.message),
                )
            )

        wait_for_image(
            self._preflight_api(),
            manifest,
            timeout=opts.image_wait,
            poll=opts.image_poll,
            progress=show,
        )

    def _relay_check(self, request: PreflightRequest) -> Check:
        """Where native-harness pods reach this controller's relays."""
        key = "sandbox.options.relay_address"
        address = self.options.relay_address
        if address:
            return Check(key=key, ok=True, message=f"native-harness pods dial {address}")
        pod_ip = os.environ.get("POD_IP")
        if pod_ip:
            return Check(key=key, ok=True, message=f"native-harness pods dial $POD_IP ({pod_ip})")
        if request.distributed:  # the attempts run on workers, whose $POD_IP this is not
            return Check(
                key=key,
                ok=True,
                warning=True,
                message="$POD_IP is not set here, so each Ray worker needs it: "
                + RELAY_ADDRESS_FIX,
            )
        return Check(key=key, ok=False, message=RELAY_ADDRESS_FIX)

    def _preflight_api(self) -> KubeApi:
        """A client whose calls get ``api_retries`` tries, without the retry window."""
        return kube_api(self.options.client_settings, Retries(backoff=self.options.backoff))

    def pods(self, labels: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """The sandbox pods in the namespace matching ``labels`` (all when None)."""
        return self.api.list_pods(self.options.namespace, selector(labels or {}))

    def check_cluster(self) -> str:
        """One API call (list this backend's sandbox pods): is the cluster there for us?

        Raises:
            ConfigError: no cluster configuration could be loaded.
            ApiCallError: the API is unreachable or refuses the call (after
                ``api_retries`` tries: preflight does not wait out the retry window).
        """
        opts = self.options
        pods = self._preflight_api().list_pods(opts.namespace, selector({}))
        return (
            f"Kubernetes API reachable, namespace {self.options.namespace}: "
            f"{len(pods)} sandbox pods now"
        )

    def sweep(self, labels: dict[str, str] | None = None) -> int:
        """Delete every sandbox pod matching ``labels`` (e.g. ``{"run": run_id}``).

        Returns:
            How many pods were deleted.
        """
        count = 0
        for pod in self.pods(labels):
            name = pod["metadata"]["name"]
            if self._delete(name):
                count += 1
        logger.info(
            "swept %d sandbox pods from %s (%s)",
            count,
            self.options.namespace,
            selector(labels or {}),
        )
        return count

    def _delete(self, name: str) -> bool:
        opts = self.options
        lease = self.slots.acquire("delete", opts.max_deleting, timeout=300.0, ttl=120.0)
        try:
            return self.api.delete_pod(opts.namespace, name)
        finally:
            self.slots.release("delete", lease)


class KubernetesSandbox(Sandbox):
    """One sandbox pod. Create it with ``KubernetesBackend.create``."""

    def __init__(self, backend: KubernetesBackend, spec: SandboxSpec) -> None:
        super().__init__(sandbox_id=secrets.token_hex(6), limits=spec.limits)
        self._backend = backend
        self._opts = opts = backend.options
        self._api = backend.api
        self.labels = dict(spec.labels)
        self._relay = self._relay_endpoint(opts) if spec.relay_network else None
        if self._relay is not None:
            self.labels[NATIVE_HARNESS_LABEL] = "true"
        self._ns = opts.namespace
        self._final: PodState | None = None
        self._timings: dict[str, float] = {}
        self._node: str | None = None
        self._runtime: dict[str, Any] = {}
        self._uid = opts.uid if opts.uid is not None else UID_BASE + int(self.id, 16) % UID_SPAN
        self._env = {
            "PATH": opts.path,
            "HOME": TMP_DIR,
            "LANG": "C.UTF-8",
            "TMPDIR": TMP_DIR,
            **dict(spec.env),
        }
        self.name = pod_name(self.labels, self.id)
        self._created = False
        self._pending_cause: PendingCause | None = None
        self._pending_seen: dict[tuple[str, str], float] = {}
        started = time.monotonic()
        self._staging = backend.staging()
        self._workspace = self._stage_local(spec.workspace)
        self._timings["cache"] = self._workspace.seconds
        template = backend.pod_template(self._uid)
        self.manifest = pod_manifest(
            template=template,
            name=self.name,
            sandbox_id=self.id,
            labels=self.labels,
            limits=self.limits,
            workspace=self._workspace_mount(),
            image=spec.image,
        )
        try:
            lease = backend.slots.acquire(
                "create",
                opts.max_pending,
                timeout=opts.ready_timeout,
                ttl=opts.ready_timeout + opts.stage_timeout + 60,
            )
        except SlotTimeoutError as exc:
            raise PodFailedError(f"sandbox for {self._what()}: {exc}", code="slots") from exc
        self._timings["slot_wait"] = time.monotonic() - started
        try:
            self._start()
            self._runtime = self._read_runtime()
        except BaseException:
            self._cleanup_failed_start()
            raise
        finally:
            backend.slots.release("create", lease)
        self._timings["create_total"] = time.monotonic() - started
        self.start_clock()

    # ---- start -------------------------------------------------------------------------

    def _what(self) -> str:
        keys = ("run", "agent", "task", "attempt")
        return "/".join(self.labels[k] for k in keys if k in self.labels) or self.id

    @staticmethod
    def _relay_endpoint(opts: KubernetesOptions) -> dict[str, Any]:
        address = opts.relay_address or os.environ.get("POD_IP")
        if not address:
            raise ConfigError(f"kubernetes sandbox backend: {RELAY_ADDRESS_FIX}")
        return {
            "bind": opts.relay_bind or address,
            "address": address,
            "ports": list(opts.relay_ports),
        }

    def _stage_local(self, workspace: Path | str) -> CachedWorkspace:
        cache = self._backend.cache(self._staging)
        streaming = self._staging.volume is None
        try:
            return cache.fetch(workspace, copy_local=not streaming)
        except SandboxError as exc:
            raise PodFailedError(f"sandbox for {self._what()}: {exc}", code="staging") from exc
        except OSError as exc:
            raise PodFailedError(
                f"sandbox for {self._what()}: workspace cache {cache.root}: {exc}", code="staging"
            ) from exc

    def _workspace_mount(self) -> VolumeWorkspace | StreamedWorkspace:
        ws = self._workspace
        return workspace_mount(
            self._opts, self._staging, size_bytes=ws.size_bytes, sub_path=ws.sub_path
        )

    def _start(self) -> None:
        opts = self._opts
        t0 = time.monotonic()
        created = self._create_pod()
        self._created = True
        self._timings["create_call"] = time.monotonic() - t0
        # a wait for quota room is not time the pod took to become ready
        end = t0 + opts.ready_timeout + self._timings.get("quota_wait", 0.0)
        rv = (created.get("metadata") or {}).get("resourceVersion")
        state = classify_pod(created)
        staged = self._staging.volume is None
        while True:
            wanted = ("stageable", "ready") if staged else ("ready",)
            if state.kind not in wanted and not state.terminal:
                state, rv = self._wait(wanted, end, rv, state)
            if state.node:
                self._node = state.node
            if state.kind == "stageable" and staged:
                t = time.monotonic()
                self._stream_workspace()
                self._timings["stage_stream"] = time.monotonic() - t
                staged = False
                state = PodState(kind="pending", node=state.node)
                continue
            if state.kind == "ready":
                self._timings["ready"] = time.monotonic() - t0
                return
            self._raise_for(state, "did not start")

    def _read_runtime(self) -> dict[str, Any]:
        """The identity of the Data Workbench Runtime manifest the pod's image holds."""
        from dataspace.sandbox import workbench

        image = self.manifest["spec"]["containers"][0]["image"]
        path = workbench.MANIFEST_PATH
        args = {"path": path, "max_bytes": workbench.MANIFEST_MAX_BYTES}
        try:
            reply = self._helper("image-file", args, timeout=60.0)
        except (ExecLostError, ApiCallError) as exc:
            raise PodFailedError(
                f"sandbox for {self._what()}: reading {path} failed: {exc}",
                code="k8s_api",
                pod=self.name,
            ) from exc
        head = reply.header
        try:
            if not head.get("ok"):
                raise ValueError(head.get("message") or "unreadable")
            manifest = workbench.parse_manifest(reply.payload[: int(head.get("size", 0))])
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
            raise PodFailedError(
                f"sandbox pod {self._ns}/{self.name}: image {image} has no readable Data "
                f"Workbench Runtime manifest at {path} ({exc}); build the runtime image with "
                "images/build.sh and set sandbox.image to it",
                code="runtime_manifest",
                pod=self.name,
            ) from None
        self._timings["runtime_manifest_bytes"] = float(head.get("size", 0))
        return workbench.manifest_identity(manifest)

    def _create_pod(self) -> dict[str, Any]:
        """POST the pod; resolve lost answers (409 on our own name) and name clashes.

        Transient failures are retried for the API retry window; a quota refusal waits
        for room (``quota_timeout``) as a Pending pod waits for a node; a Pod Security or
        admission refusal is a bad spec, named as such.
        """
        api, retries = self._api, self._opts.retries
        manifest = self.manifest
        tries, since = 0, time.monotonic()
        quota_since, quota_tries = 0.0, 0
        while True:
            try:
                return api.create_pod(self._ns, manifest)
            except ApiCallError as exc:
                if exc.status == 409:
                    existing = api.get_pod(self._ns, self.name)
                    notes = ((existing or {}).get("metadata") or {}).get("annotations") or {}
                    if existing is not None and notes.get(SANDBOX_ID_ANNOTATION) == self.id:
                        logger.info("pod %s was created by an earlier try; adopted", self.name)
                        return existing
                    self.name = pod_name(self.labels, secrets.token_hex(3) + self.id[:3])
                    manifest = {**manifest, "metadata": {**manifest["metadata"], "name": self.name}}
                    self.manifest = manifest
                    logger.info("pod name clash; retrying as %s", self.name)
                    continue
                if exc.cause == "quota":
                    quota_since = quota_since or time.monotonic()
                    quota_tries += 1
                    self._wait_for_quota(exc, quota_since, quota_tries)
                    continue
                if exc.cause in ("pod_security", "admission"):
                    what = "Pod Security" if exc.cause == "pod_security" else "an admission policy"
                    raise PodFailedError(
                        f"sandbox for {self._what()}: the pod is refused by {what} (a bad "
                        f"sandbox spec; `dataspace doctor SPEC` shows it before a run): {exc}",
                        code=exc.cause,
                        pod=self.name,
                    ) from exc
                tries += 1
                if not is_transient(exc) or not retries.again(tries, since):
                    raise PodFailedError(
                        f"sandbox for {self._what()}: pod creation failed: {exc}",
                        code="k8s_api",
                        pod=self.name,
                    ) from exc
                delay = retries.delay(tries)
                logger.warning(
                    "create pod %s failed (%s), try %d, retrying in %.2fs",
                    self.name,
                    exc,
                    tries,
                    delay,
                )
                time.sleep(delay)

    def _wait_for_quota(self, exc: ApiCallError, since: float, tries: int) -> None:
        """Back off after a quota refusal; raise when it can never fit or waited too long."""
        never = quota_never_fits(exc.detail)
        if never:
            raise PodFailedError(
                f"sandbox for {self._what()}: the pod alone exceeds the namespace's quota "
                f"({never}): raise the ResourceQuota (k8s/base/resourcequota.yaml) or lower "
                f"the spec's sandbox limits: {exc.detail}",
                code="quota",
                pod=self.name,
            ) from exc
        waited = time.monotonic() - since
        if waited >= self._opts.quota_timeout:
            raise PodFailedError(
                f"sandbox for {self._what()}: no room in the namespace's quota for "
                f"{waited:.0f}s (sandbox option quota_timeout): {exc.detail}",
                code="quota",
                pod=self.name,
            ) from exc
        b = self._opts.backoff
        delay = backoff_delay(
            tries, base=b.base, cap=max(b.cap, 10.0), jitter=0.5 + random.random() / 2
        )
        logger.warning(
            "create pod %s: quota full, waiting %.1fs for room (%s)", self.name, delay, exc.detail
        )
        self._timings["quota_wait"] = waited + delay
        time.sleep(delay)

    def _wait(
        self, wanted: tuple[str, ...], end: float, rv: str | None, state: PodState
    ) -> tuple[PodState, str | None]:
        """Watch the pod until its state is in ``wanted`` or terminal, or ``end`` passes."""
        api, retries = self._api, self._opts.retries
        failures, failing_since = 0, 0.0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                why = f"was not ready within {self._opts.ready_timeout:.0f}s"
                if self._pending_cause is not None:
                    why += f"; latest warning {self._pending_cause}"
                self._raise_for(state, why, code="pod_pending_timeout")
            try:
                for kind, obj in api.watch_pod(self._ns, self.name, rv, min(left, PENDING_POLL)):
                    if kind == "DELETED":
                        return classify_pod(None), rv
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    state = classify_pod(obj)
                    if state.kind in wanted or state.terminal or time.monotonic() >= end:
                        break
                failures, failing_since = 0, 0.0
            except ApiCallError as exc:
                if exc.status == 410:
                    rv = None
                elif is_transient(exc) and retries.again(
                    failures + 1, failing_since or time.monotonic()
                ):
                    failing_since = failing_since or time.monotonic()
                    failures += 1
                    time.sleep(retries.delay(failures))
                else:
                    raise PodFailedError(
                        f"sandbox for {self._what()}: {exc}", code="k8s_api", pod=self.name
                    ) from exc
            if state.kind in wanted or state.terminal:
                return state, rv
            pod = api.get_pod(self._ns, self.name)
            state = classify_pod(pod)
            if pod is not None:
                rv = (pod.get("metadata") or {}).get("resourceVersion") or rv
            if state.kind in wanted or state.terminal:
                return state, rv
            self._check_pending()

    def _check_pending(self) -> None:
        """Read the events of the not-ready pod; fail the start once a cause has lasted.

        A Warning that is the pod's newest event is logged when first seen and ends the
        start after ``start_warning_timeout`` (``unschedulable_timeout`` while it only
        waits for room on a node), with its reason and message: a runtime that cannot
        create the sandbox or a missing claim never fixes itself within ``ready_timeout``.
        """
        opts = self._opts
        events = self._api.pod_events(self._ns, self.name)
        cause = pending_cause(events)
        self._pending_cause = cause
        if cause is None:
            return
        now = time.monotonic()
        first = self._pending_seen.setdefault((cause.reason, cause.code), now)
        if first == now:
            logger.warning(
                "sandbox pod %s/%s for %s is not ready: %s",
                self._ns,
                self.name,
                self._what(),
                cause,
            )
        limit = (
            opts.unschedulable_timeout if cause.waits_for_capacity else opts.start_warning_timeout
        )
        if now - first >= limit:
            raise PodFailedError(
                f"sandbox pod {self._ns}/{self.name} for {self._what()} did not start "
                f"within {limit:g}s of {cause}",
                code=cause.code,
                pod=self.name,
                events=format_events(events),
            )

    def _stream_workspace(self) -> None:
        tar = self._backend.cache(self._staging).tar_path(self._workspace)
        size = tar.stat().st_size
        try:
            reply = self._helper(
                "stage",
                {"size": size, "dest": "/workspace"},
                container=STAGE_CONTAINER,
                timeout=self._opts.stage_timeout,
                stdin=tar,
            )
        except (ExecLostError, ApiCallError) as exc:
            raise PodFailedError(
                f"sandbox for {self._what()}: staging failed: {exc}", code="staging", pod=self.name
            ) from exc
        if not reply.header.get("ok"):
            raise PodFailedError(
                f"sandbox for {self._what()}: staging failed: {reply.header.get('message')}",
                code="staging",
                pod=self.name,
            )
        self._timings["staged_bytes"] = float(size)

    def _raise_for(self, state: PodState, what: str, *, code: str | None = None) -> None:
        codes = {
            "image_error": "image_pull",
            "evicted": "pod_evicted",
            "gone": "pod_gone",
            "deadline": "pod_deadline",
            "oom": "pod_oom",
            "storage_limit": "pod_storage",
        }
        code = code or codes.get(state.kind, "pod_failed")
        events = format_events(self._api.pod_events(self._ns, self.name))
        detail = f"{state.reason}: {state.message}" if state.reason else state.message
        raise PodFailedError(
            f"sandbox pod {self._ns}/{self.name} for {self._what()} {what}"
            + (f" ({detail})" if detail else ""),
            code=code,
            pod=self.name,
            events=events,
        )

    def _cleanup_failed_start(self) -> None:
        try:
            self._backend._delete(self.name)
        except Exception:
            logger.exception("could not delete the failed sandbox pod %s/%s", self._ns, self.name)
        self._closed = True

    # ---- helper calls --------------------------------------------------------------------

    def _helper(
        self,
        op: str,
        args: Mapping[str, Any],
        *,
        timeout: float,
        container: str = MAIN_CONTAINER,
        stdin: bytes | Path | None = None,
    ) -> HelperReply:
        """One helper exec; handshake failures (the command never started) are retried."""
        retries, since = self._opts.retries, time.monotonic()
        for attempt in itertools.count(1):
            try:
                return run_helper(
                    self._api,
                    self._ns,
                    self.name,
                    op,
                    args,
                    container=container,
                    timeout=timeout,
                    stdin=stdin,
                    python=self._opts.python,
                )
            except ApiCallError as exc:
                if not is_transient(exc) or not retries.again(attempt, since):
                    raise
                time.sleep(retries.delay(attempt))
        raise AssertionError("unreachable")

    def _pod_state(self) -> PodState:
        try:
            return classify_pod(self._api.get_pod(self._ns, self.name))
        except ApiCallError as exc:
            raise PodFailedError(
                f"sandbox for {self._what()}: {exc}", code="k8s_api", pod=self.name
            ) from exc

    def _settled_state(self) -> PodState:
        """The pod's state once its phase has settled, read again for ``settle_timeout``.

        The kubelet kills the containers first and reports the phase about a second later
        (after the containers' own end, which alone would read as a container that exited):
        one read would blame the API or the container for the pod's deadline or eviction.
        Past the window the Warning events the kubelet recorded as it killed tell the end;
        without them the last state read stands.
        """
        end = time.monotonic() + self._opts.settle_timeout
        pause = 0.05
        while True:
            state = self._pod_state()
            left = end - time.monotonic()
            if state.settled or left <= 0:
                break
            time.sleep(min(pause, left))
            pause = min(2 * pause, 0.5)
        if not state.settled:
            try:
                announced = ending_from_events(self._api.pod_events(self._ns, self.name))
            except ApiCallError:
                announced = None
            if announced is not None:
                logger.info(
                    "pod %s: phase still %s after %.0fs; its events say %s",
                    self.name,
                    state.phase or "unknown",
                    self._opts.settle_timeout,
                    announced.reason,
                )
                return dataclasses.replace(announced, node=state.node, phase=state.phase)
        return state

    def _lost(self, exc: Exception) -> PodState:
        """After a broken exec: the pod's terminal state (raising for infrastructure ends)."""
        state = self._settled_state()
        if not state.terminal:
            raise PodFailedError(
                f"sandbox for {self._what()}: exec failed while the pod runs: {exc}",
                code="k8s_api",
                pod=self.name,
            ) from exc
        self._final = state
        if state.infrastructure:
            self._raise_for(state, "failed")
        return state

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError(f"sandbox {self.id} (pod {self._ns}/{self.name}) is closed")

    # ---- the contract ---------------------------------------------------------------------

    def _ended_result(self) -> ExecResult | None:
        return None if self._final is None else self._final_result()

    def _exec(self, plan: ExecPlan) -> ExecResult:
        """Run a validated command through the helper in the pod.

        Raises:
            PodFailedError: the pod failed for infrastructure reasons.
        """
        argv, cwd, env, limit, kind = plan.argv, plan.cwd, plan.env, plan.limit, plan.kind
        args = {
            "argv": argv,
            "cwd": cwd,
            "env": {**self._env, **env},
            "timeout": limit,
            "max_output": self._opts.max_output_bytes,
            "nproc": self.limits.pids,
        }
        started = time.monotonic()
        try:
            reply = self._helper("run", args, timeout=limit)
        except (ExecLostError, ApiCallError) as exc:
            self._lost(exc)
            return self._final_result(duration=time.monotonic() - started)
        head = reply.header
        out_len, err_len = int(head.get("stdout", 0)), int(head.get("stderr", 0))
        stdout = reply.payload[:out_len].decode("utf-8", "replace")
        stderr = reply.payload[out_len : out_len + err_len].decode("utf-8", "replace")
        dropped = head.get("dropped") or [0, 0]
        if dropped[0]:
            stdout += f"\n[... {dropped[0]} more bytes of output dropped by the sandbox ...]\n"
        if dropped[1]:
            stderr += f"\n[... {dropped[1]} more bytes of output dropped by the sandbox ...]\n"
        timed_out = bool(head.get("timed_out"))
        status = exec_status(
            kind,
            killed=timed_out,
            past_deadline=self.past_deadline(),
            memory=bool(head.get("oom")),
        )
        return ExecResult(
            exit_code=head.get("exit_code"),
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            duration=float(head.get("duration") or 0.0),
            status=status,
        )

    def _ended_error(self, what: str) -> OSError:
        """A file operation on a pod that ended for the agent's own limits.

        An ``OSError`` (as the contract has for limits), never a ``SandboxError``: the pod
        ended at its deadline or for its own memory or storage limits, which is the agent's
        outcome, not an infrastructure failure to retry.
        """
        state = self._final
        assert state is not None
        code = {"deadline": errno.ETIME, "storage_limit": errno.ENOSPC}.get(
            state.kind, errno.ENOMEM
        )
        return OSError(
            code, f"sandbox pod {self.name} has ended ({state.reason}: {state.message}); {what}"
        )

    def _final_result(self, duration: float = 0.0) -> ExecResult:
        state = self._final
        assert state is not None
        status: ExecStatus = "deadline" if state.kind == "deadline" else "resource_limit"
        code = 137 if state.kind == "oom" else None
        return ExecResult(
            exit_code=code,
            stdout="",
            timed_out=False,
            duration=duration,
            stderr=f"sandbox pod {self.name}: {state.reason}: {state.message}",
            status=status,
        )

    def read_file(self, path: str, *, max_bytes: int = 64 * 1024**2) -> bytes:
        """Read a file under /output (absolute or relative to it); no symlinks followed.

        Raises:
            PermissionError: the path leaves /output, or a component is a symbolic link.
            FileNotFoundError: no such file.
            IsADirectoryError: the path names a folder.
            OSError: ``EFBIG`` when the file holds more than ``max_bytes``.
            SandboxClosedError: the sandbox is closed.
        """
        from dataspace.sandbox._paths import output_parts

        self._check_open()
        parts = output_parts(path)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, f"{path}: is the output folder")
        reply = self._file_op("read", {"parts": list(parts), "max_bytes": max_bytes}, path)
        return reply.payload[: int(reply.header.get("size", 0))]

    def write_file(self, path: str, data: bytes) -> None:
        """Write a file under /output (absolute or relative to it), parents created.

        Raises:
            PermissionError: the path leaves /output, or a component is a symbolic link.
            OSError: ``ENOSPC`` past the output size limit.
            SandboxClosedError: the sandbox is closed.
        """
        from dataspace.sandbox._paths import output_parts

        self._check_open()
        parts = output_parts(path)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, f"{path}: is the output folder")
        data = bytes(data)
        self._file_op("write", {"parts": list(parts), "size": len(data)}, path, stdin=data)

    def _file_op(
        self, op: str, args: Mapping[str, Any], path: str, stdin: bytes | None = None
    ) -> HelperReply:
        if self._final is not None:
            raise self._ended_error(f"cannot {op} {path}")
        timeout = max(60.0, self.limits.command_timeout)
        try:
            reply = self._helper(op, args, timeout=timeout, stdin=stdin)
        except (ExecLostError, ApiCallError) as exc:
            self._lost(exc)  # raises for infrastructure ends
            raise self._ended_error(f"during {op} {path}") from exc
        head = reply.header
        if not head.get("ok"):
            code = int(head.get("errno") or errno.EIO)
            raise OSError(code, f"{path}: {head.get('message')}")
        return reply

    def collect(self, dest: Path) -> list[Path]:
        """Copy the output folder's regular files to ``dest`` (no symlinks, size-limited).

        After the pod ended for a resource limit or the deadline there is nothing left to
        collect (the outputs died with it): an empty list is returned.
        """
        self._check_open()
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        if self._final is not None:
            logger.warning(
                "sandbox pod %s ended (%s): no outputs to collect", self.name, self._final.reason
            )
            return []
        budget = self.limits.output_bytes
        timeout = max(120.0, self.limits.command_timeout)
        try:
            reply = self._helper("collect", {"max_bytes": budget}, timeout=timeout)
        except (ExecLostError, ApiCallError) as exc:
            self._lost(exc)
            return []
        for name, why in reply.header.get("skipped") or []:
            logger.info("collect %s: %s skipped: %s", self.name, name, why)
        size = int(reply.header.get("size", 0))
        return extract_outputs(reply.payload[:size], dest, budget)

    def info(self) -> dict[str, object]:
        """Backend facts for the attempt record: pod, node, enforcement, staging, timings."""
        self._check_open()
        ws = self._workspace
        return {
            "backend": "kubernetes",
            "id": self.id,
            "enforcement": "kubernetes",
            "namespace": self._ns,
            "pod": self.name,
            "node": self._node,
            "image": self.manifest["spec"]["containers"][0]["image"],
            "runtime": dict(self._runtime),
            "uid": self._uid,
            "network": (
                "none (NetworkPolicy)"
                if self._relay is None
                else "relay ports of the controller only (NetworkPolicy)"
            ),
            **({} if self._relay is None else {"relay": dict(self._relay)}),
            "staging": {
                "mode": self._staging.mode,
                **({"volume": self._staging.source} if self._staging.volume is not None else {}),
                "cache_key": ws.key,
                "cache_hit": ws.cache_hit,
                "fetched_bytes": ws.fetched_bytes,
                "workspace_bytes": ws.size_bytes,
                "files": ws.files,
            },
            "limits": dataclasses.asdict(self.limits),
            "labels": dict(self.labels),
            "timings": dict(self._timings),
            "execs": self._execs,
            "seconds_left": self.seconds_left(),
        }

    def close(self) -> None:
        """Delete the pod (grace 0); idempotent.

        Raises:
            PodFailedError: the pod could not be deleted (a later ``sweep`` will).
        """
        if not self._mark_closed():
            return
        try:
            self._backend._delete(self.name)
        except ApiCallError as exc:
            raise PodFailedError(
                f"sandbox pod {self._ns}/{self.name} could not be deleted: {exc}",
                code="k8s_api",
                pod=self.name,
            ) from exc


def workspace_mount(
    opts: KubernetesOptions, staging: Staging, *, size_bytes: int, sub_path: str
) -> VolumeWorkspace | StreamedWorkspace:
    """How a pod of this backend mounts a workspace of ``size_bytes`` (cached at ``sub_path``).

    Raises:
        ConfigError: pods must be pinned to the controller's node, which is not known.
    """
    volume = staging.volume
    if volume is None:
        return StreamedWorkspace(size_bytes=size_bytes, stage_timeout=opts.stage_timeout)
    pin = opts.pin_to_node
    if pin is None:
        pin = "hostPath" in volume
    node = (opts.node_name or os.environ.get("NODE_NAME")) if pin else None
    if pin and not node:
        raise ConfigError(
            "kubernetes sandbox backend: pin_to_node needs node_name or "
            "$NODE_NAME (the controller's node, from the downward API)"
        )
    return VolumeWorkspace(volume=volume, sub_path=sub_path, node=node)


__all__ = [
    "BASE_PATH",
    "DEFAULT_IMAGE",
    "DEFAULT_NAMESPACE",
    "NATIVE_HARNESS_LABEL",
    "RELAY_ADDRESS_FIX",
    "RELAY_PORTS",
    "KubernetesBackend",
    "KubernetesOptions",
    "KubernetesSandbox",
    "PodFailedError",
    "extract_outputs",
    "workspace_mount",
]
