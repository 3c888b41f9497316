"""The few Kubernetes API calls the sandbox controller makes, with retries.

Calls: pods create / get / list / watch / delete, events list, and exec (a websocket through
the API server). Bodies are read as plain JSON (``_preload_content=False``): the
controller only needs a few status fields and skipping the client's model classes keeps
its memory per live sandbox small. Throttling (429), 5xx answers and connection errors are
retried with full-jitter backoff for a stated window (``Retries``: an API server restart
drains for about a minute); anything else is raised at once, its cause named from the
answer (``refusal_cause``: a quota, Pod Security, an admission policy or RBAC).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from dataspace.errors import ConfigError, SandboxError
from dataspace.store.retry import Backoff, backoff_delay

logger = logging.getLogger(__name__)

T = TypeVar("T")
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
REQUEST_TIMEOUT = (10.0, 60.0)
"""Connect and read timeouts of every plain API call (seconds)."""


class ApiCallError(SandboxError):
    """An API call failed for good.

    Attributes:
        status: the HTTP status (0 when no answer came back).
        reason: the API's ``reason`` (``NotFound``, ``AlreadyExists``, ``Forbidden``, ...).
        cause: what refused a request, read from the answer (``refusal_cause``):
            ``quota``, ``pod_security``, ``admission``, ``rbac`` or ``""``.
        detail: the API's own message.
    """

    def __init__(
        self, message: str, *, status: int, reason: str = "", cause: str = "", detail: str = ""
    ) -> None:
        self.status = status
        self.reason = reason
        self.cause = cause
        self.detail = detail
        super().__init__(message)


REFUSAL_HINTS = {
    "quota": " (the namespace's ResourceQuota is full: k8s/base/resourcequota.yaml)",
    "pod_security": (
        " (the pod breaks the namespace's Pod Security level: a bad sandbox spec; keep the "
        "sandbox options' defaults or relax pod-security.kubernetes.io/enforce)"
    ),
    "admission": (
        " (an admission policy refused the pod: a bad sandbox spec; see "
        "k8s/base/sandbox-admission-policy.yaml)"
    ),
    "rbac": " (check the controller's RBAC: k8s/base/rbac.yaml)",
}
"""What to do about each refusal cause, appended to the error."""


def refusal_cause(status: int, message: str) -> str:
    """What refused a request, from its status and the API's message.

    >>> refusal_cause(403, 'pods "p" is forbidden: exceeded quota: sandboxes, requested: pods=1')
    'quota'
    >>> refusal_cause(403, 'pods "p" is forbidden: violates PodSecurity "restricted:latest": x')
    'pod_security'
    >>> refusal_cause(403, 'pods is forbidden: User "u" cannot list resource "pods" ...')
    'rbac'
    >>> refusal_cause(404, 'namespaces "x" not found')
    ''
    """
    if status not in (401, 403, 422):
        return ""
    if "exceeded quota:" in message:
        return "quota"
    if "violates PodSecurity" in message:
        return "pod_security"
    if "ValidatingAdmissionPolicy" in message or "admission webhook" in message:
        return "admission"
    if status == 403:
        return "rbac"
    return ""


def quota_never_fits(message: str) -> str:
    """What a pod alone asks beyond a quota's limits, from a quota refusal ('' if nothing).

    Such a pod can never be admitted, however many others end.

    >>> quota_never_fits("exceeded quota: q, requested: limits.cpu=8,pods=1, "
    ...                  "used: limits.cpu=0,pods=1, limited: limits.cpu=4,pods=1")
    'limits.cpu=8 > 4'
    >>> quota_never_fits("exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1")
    ''
    """
    import re

    from dataspace.sandbox.kubernetes._pod import parse_quantity

    m = re.search(r"requested: (.*?), used: (.*?), limited: (.*)$", message.strip())
    if not m:
        return ""

    def values(text: str) -> dict[str, str]:
        return dict(p.split("=", 1) for p in text.split(",") if "=" in p)

    asked, limited = values(m.group(1)), values(m.group(3))
    try:
        over = [
            f"{k}={v} > {limited[k]}"
            for k, v in asked.items()
            if k in limited and parse_quantity(v) > parse_quantity(limited[k])
        ]
    except (ValueError, ZeroDivisionError):
        return ""
    return ", ".join(over)


@dataclass(frozen=True, kw_only=True)
class Retries:
    """How long transient API failures (throttling, 5xx, no connection) are retried.

    Attributes:
        backoff: the delays and the least number of tries.
        window: seconds from the first failure during which tries go on past
            ``backoff.attempts`` (an API server restart drains for about a minute).
    """

    backoff: Backoff
    window: float = 0.0

    def again(self, tries: int, since: float) -> bool:
        """Whether to try again after ``tries`` failed tries, the first at ``since``."""
        return tries < self.backoff.attempts or time.monotonic() - since < self.window

    def delay(self, tries: int) -> float:
        """The full-jitter delay after ``tries`` failed tries."""
        b = self.backoff
        return backoff_delay(tries, base=b.base, cap=b.cap, jitter=random.random())


@dataclass(frozen=True, kw_only=True)
class ClientSettings:
    """How to reach the API server.

    Attributes:
        api_host: a plain URL (``http://127.0.0.1:8001`` for ``kubectl proxy`` or a test
            double); no credentials are sent.
        kubeconfig: a kubeconfig file (default: ``$KUBECONFIG`` or ``~/.kube/config``).
        context: a kubeconfig context.
        in_cluster: use the pod's service account (default when running in a pod).
        pool_size: HTTP connections kept per client.
    """

    api_host: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    pool_size: int = 32


_CLIENTS: dict[tuple[ClientSettings, Retries], KubeApi] = {}
_CLIENTS_LOCK = threading.Lock()


def kube_api(settings: ClientSettings, retries: Retries) -> KubeApi:
    """The process-wide client for ``settings`` (created once, shared by every sandbox)."""
    with _CLIENTS_LOCK:
        api = _CLIENTS.get((settings, retries))
        if api is None:
            api = KubeApi(_configuration(settings), retries=retries)
            _CLIENTS[(settings, retries)] = api
        return api


def _configuration(settings: ClientSettings) -> Any:
    import os

    try:
        from kubernetes import client, config
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "the kubernetes sandbox backend needs the kubernetes client: "
            "pip install 'kubernetes>=33,<37'"
        ) from exc
    cfg = client.Configuration()
    if settings.api_host:
        cfg.host = settings.api_host.rstrip("/")
    else:
        in_cluster = settings.in_cluster
        if in_cluster is None:
            in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ and not settings.kubeconfig
        try:
            if in_cluster:
                config.load_incluster_config(client_configuration=cfg)
            else:
                config.load_kube_config(
                    config_file=settings.kubeconfig,
                    context=settings.context,
                    client_configuration=cfg,
                )
        except Exception as exc:
            where = (
                "in-cluster service account"
                if in_cluster
                else (settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config")
            )
            raise ConfigError(
                f"kubernetes sandbox backend: cannot load the cluster configuration from "
                f"{where}: {exc}"
            ) from exc
    cfg.connection_pool_maxsize = settings.pool_size
    return cfg


def is_transient(exc: BaseException) -> bool:
    """Whether an API failure is worth retrying (throttling, 5xx, connection trouble)."""
    if isinstance(exc, ApiCallError):
        return exc.status in TRANSIENT_STATUS or exc.status == 0
    return False


class KubeApi:
    """Pods, events and exec in one namespace-agnostic client."""

    def __init__(self, configuration: Any, *, retries: Retries) -> None:
        from kubernetes import client

        self.configuration = configuration
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.retries = retries

    # ---- plumbing -----------------------------------------------------------------------

    def _once(self, describe: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One call, its body parsed as JSON; errors become ``ApiCallError``."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
        try:
            resp = fn(*args, _preload_content=False, **kwargs)
            data = resp.data
        except ApiException as exc:
            raise _api_error(describe, exc) from None
        except (HTTPError, OSError) as exc:
            raise ApiCallError(f"{describe}: {type(exc).__name__}: {exc}", status=0) from None
        return json.loads(data) if data else {}

    def call(self, describe: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``_once`` with retries of transient failures (for ``retries.window`` at least)."""
        tries, since = 0, time.monotonic()
        while True:
            try:
                return self._once(describe, fn, *args, **kwargs)
            except ApiCallError as exc:
                tries += 1
                if not is_transient(exc) or not self.retries.again(tries, since):
                    raise
                delay = self.retries.delay(tries)
                logger.warning(
                    "%s failed (%s), try %d, retrying in %.2fs", describe, exc, tries, delay
                )
                time.sleep(delay)

    # ---- pods ---------------------------------------------------------------------------

    def create_pod(self, namespace: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """POST one pod (not retried here: the caller resolves lost answers by name)."""
        name = manifest["metadata"]["name"]
        return self._once(
            f"create pod {namespace}/{name}", self.core.create_namespaced_pod, namespace, manifest
        )

    def dry_run_pod(self, namespace: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """POST one pod with ``dryRun=All``: every admission check, nothing created."""
        name = manifest["metadata"]["name"]
        return self.call(
            f"dry-run create pod {namespace}/{name}",
            self.core.create_namespaced_pod,
            namespace,
            manifest,
            dry_run="All",
        )

    def read_namespace(self, namespace: str) -> dict[str, Any]:
        """The Namespace object (``ApiCallError`` 404 when it does not exist)."""
        return self.call(f"read namespace {namespace}", self.core.read_namespace, namespace)

    def read_claim(self, namespace: str, name: str) -> dict[str, Any]:
        """A PersistentVolumeClaim (``ApiCallError`` 404 when it does not exist)."""
        return self.call(
            f"read persistentvolumeclaim {namespace}/{name}",
            self.core.read_namespaced_persistent_volume_claim,
            name,
            namespace,
        )

    def list_claims(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        """The PersistentVolumeClaims of a namespace matching the selector."""
        body = self.call(
            f"list persistentvolumeclaims in {namespace}",
            self.core.list_namespaced_persistent_volume_claim,
            namespace,
            label_selector=label_selector,
        )
        return list(body.get("items") or [])

    def list_nodes(self) -> list[dict[str, Any]]:
        """Every Node of the cluster."""
        return list(self.call("list nodes", self.core.list_node).get("items") or [])

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The pod, or None when it does not exist."""
        try:
            return self.call(
                f"read pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace
            )
        except ApiCallError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete now (grace 0); False when it was already gone."""
        try:
            self.call(
                f"delete pod {namespace}/{name}",
                self.core.delete_namespaced_pod,
                name,
                namespace,
                grace_period_seconds=0,
                propagation_policy="Background",
            )
        except ApiCallError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list_pods(
        self, namespace: str, label_selector: str, page: int = 500
    ) -> list[dict[str, Any]]:
        """Every pod matching the selector, read page by page."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"label_selector": label_selector, "limit": page}
            if token:
                kwargs["_continue"] = token
            body = self.call(
                f"list pods in {namespace}", self.core.list_namespaced_pod, namespace, **kwargs
            )
            items.extend(body.get("items") or [])
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items

    def pod_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The events about one pod (best effort: an empty list when they cannot be read)."""
        try:
            body = self.call(
                f"list events of pod {namespace}/{name}",
                self.core.list_namespaced_event,
                namespace,
                field_selector=f"involvedObject.name={name}",
            )
        except SandboxError as exc:
            logger.info("cannot read the events of %s/%s: %s", namespace, name, exc)
            return []
        return list(body.get("items") or [])

    def watch_pod(
        self, namespace: str, name: str, resource_version: str | None, timeout: float
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(event type, pod)`` for one pod until the server ends the watch.

        Raises:
            ApiCallError: the watch could not start (410 Gone when the version expired).
        """
        from kubernetes.client.rest import ApiException
        from kubernetes.watch.watch import iter_resp_lines
        from urllib3.exceptions import HTTPError

        kwargs: dict[str, Any] = {
            "field_selector": f"metadata.name={name}",
            "watch": True,
            "timeout_seconds": max(1, int(timeout)),
            "_preload_content": False,
            "_request_timeout": (REQUEST_TIMEOUT[0], max(1.0, timeout) + 15.0),
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            resp = self.core.list_namespaced_pod(namespace, **kwargs)
        except ApiException as exc:
            raise _api_error(f"watch pod {namespace}/{name}", exc) from None
        except (HTTPError, OSError) as exc:
            raise ApiCallError(f"watch pod {namespace}/{name}: {exc}", status=0) from None
        try:
            for line in iter_resp_lines(resp):
                if not line:
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    code = int(obj.get("code") or 0)
                    raise ApiCallError(
                        f"watch pod {namespace}/{name}: {obj.get('message')}",
                        status=code,
                        reason=str(obj.get("reason") or ""),
                    )
                yield str(event.get("type")), obj
        except (HTTPError, OSError) as exc:
            logger.info("watch of %s/%s ended: %s", namespace, name, exc)
        finally:
            resp.release_conn()

    # ---- exec ---------------------------------------------------------------------------

    def open_exec(
        self, namespace: str, name: str, container: str, argv: list[str], *, stdin: bool
    ) -> Any:
        """Open an exec websocket (binary channels); the caller reads and closes it.

        Raises:
            ApiCallError: the upgrade was refused (status from the handshake) or the
                connection failed (status 0).
        """
        from kubernetes.stream import ws_client

        cfg = self.configuration
        headers: dict[str, str] = {}
        for setting in cfg.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"]).lower()] = setting["value"]
        query: list[tuple[str, Any]] = [
            ("command", argv),
            ("container", container),
            ("stdin", "true" if stdin else "false"),
            ("stdout", "true"),
            ("stderr", "true"),
            ("tty", "false"),
        ]
        url = ws_client.get_websocket_url(
            f"{cfg.host}/api/v1/namespaces/{namespace}/pods/{name}/exec", query
        )
        try:
            return ws_client.WSClient(cfg, url, headers, capture_all=False, binary=True)
        except Exception as exc:
            status = int(getattr(exc, "status_code", 0) or 0)
            raise ApiCallError(
                f"exec in pod {namespace}/{name}: {type(exc).__name__}: {exc}", status=status
            ) from None


def _api_error(describe: str, exc: Any) -> ApiCallError:
    status = int(exc.status or 0)
    reason, message = str(exc.reason or ""), ""
    try:
        body = json.loads(exc.body) if exc.body else {}
        reason = str(body.get("reason") or reason)
        message = str(body.get("message") or "")
    except (ValueError, TypeError):
        message = str(exc.body or "")[:300]
    cause = refusal_cause(status, message)
    hint = REFUSAL_HINTS.get(cause, "")
    text = f"{describe}: HTTP {status} {reason}{': ' + message if message else ''}{hint}"
    return ApiCallError(text, status=status, reason=reason, cause=cause, detail=message)


__all__ = [
    "REFUSAL_HINTS",
    "ApiCallError",
    "ClientSettings",
    "KubeApi",
    "Retries",
    "is_transient",
    "kube_api",
    "quota_never_fits",
    "refusal_cause",
]
