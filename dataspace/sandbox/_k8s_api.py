"""The few Kubernetes API calls the sandbox controller makes, with retries.

Calls: pods create / get / list / watch / delete, events list, and exec (a websocket through
the API server). Bodies are read as plain JSON (``_preload_content=False``): the
controller only needs a few status fields and skipping the client's model classes keeps
its memory per live sandbox small. Throttling (429), 5xx answers and connection errors are
retried with bounded full-jitter backoff; anything else is raised at once.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from dataspace.errors import ConfigError, SandboxError
from dataspace.store.retry import Backoff, call_with_backoff

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
    """

    def __init__(self, message: str, *, status: int, reason: str = "") -> None:
        self.status = status
        self.reason = reason
        super().__init__(message)


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


_CLIENTS: dict[tuple[ClientSettings, Backoff], KubeApi] = {}
_CLIENTS_LOCK = threading.Lock()


def kube_api(settings: ClientSettings, backoff: Backoff) -> KubeApi:
    """The process-wide client for ``settings`` (created once, shared by every sandbox)."""
    with _CLIENTS_LOCK:
        api = _CLIENTS.get((settings, backoff))
        if api is None:
            api = KubeApi(_configuration(settings), backoff=backoff)
            _CLIENTS[(settings, backoff)] = api
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

    def __init__(self, configuration: Any, *, backoff: Backoff) -> None:
        from kubernetes import client

        self.configuration = configuration
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.backoff = backoff

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
        """``_once`` with retries of transient failures."""
        return call_with_backoff(
            lambda: self._once(describe, fn, *args, **kwargs),
            policy=self.backoff,
            describe=describe,
            transient=is_transient,
        )

    # ---- pods ---------------------------------------------------------------------------

    def create_pod(self, namespace: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """POST one pod (not retried here: the caller resolves lost answers by name)."""
        name = manifest["metadata"]["name"]
        return self._once(
            f"create pod {namespace}/{name}", self.core.create_namespaced_pod, namespace, manifest
        )

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
    hint = ""
    if status == 403:
        hint = " (check the controller's RBAC: k8s/base/rbac.yaml)"
    text = f"{describe}: HTTP {status} {reason}{': ' + message if message else ''}{hint}"
    return ApiCallError(text, status=status, reason=reason)


__all__ = ["ApiCallError", "ClientSettings", "KubeApi", "is_transient", "kube_api"]
