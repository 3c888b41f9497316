"""How workspaces reach sandbox pods: a volume they mount read-only, or a tar over exec.

Pods have no network, so the controller writes each workspace into a cache folder once
(``dataspace.sandbox.staging.WorkspaceCache``) and then either

* the pods mount that cache from a volume the controller also sees: a PersistentVolumeClaim
  of the sandbox namespace (read-only, so the restricted Pod Security level holds), an NFS
  export or a node-local ``hostPath``; each pod mounts its workspace's folder by
  ``subPath`` and no workspace byte crosses the API server; or
* the controller streams a tar of the cached folder into each pod over exec (through the
  API server, once per attempt), which works on any cluster.

``workspace_volume: auto`` (the default) takes the volume when the cluster offers one: the
claim of the sandbox namespace labelled ``dataspace.io/workspace-cache: "true"``
(``k8s/base/workspace-volume.yaml``), once it is Bound and provided the controller sees the
same storage at its ``dataspace.io/controller-path`` annotation (or ``workspace_cache_dir``)
as a folder. Otherwise it
streams, and preflight's ``sandbox.staging`` line says why. The choice is read once a
minute per process (one list call), not per attempt.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dataspace.errors import ConfigError
from dataspace.sandbox.kubernetes._api import ApiCallError, KubeApi
from dataspace.sandbox.kubernetes._options import KubernetesOptions

CLAIM_LABEL = "dataspace.io/workspace-cache"
"""The label (value ``"true"``) of the sandbox namespace's workspace claim."""
CONTROLLER_PATH_ANNOTATION = "dataspace.io/controller-path"
"""The claim's annotation: where the controllers mount the same storage."""
RESOLVE_SECONDS = 60.0
"""How long one process keeps the choice before asking the cluster again."""
STREAM_FIX = (
    "for a shared volume, apply k8s/base/workspace-volume.yaml or name a claim in "
    "sandbox.options.workspace_volume"
)


@dataclass(frozen=True, kw_only=True)
class Staging:
    """How this backend's workspaces reach pods.

    Attributes:
        volume: the volume source pods mount the cache from; None: streamed over exec.
        cache_dir: where the controller writes the cache (the volume's root for a volume;
            None: the default local folder).
        source: the volume for messages (``pvc/dataspace-workspaces``).
        note: how it was chosen, or why workspaces are streamed.
        warning: a volume was meant (a labelled claim) but cannot be used.
    """

    volume: Mapping[str, Any] | None
    cache_dir: str | None
    source: str = ""
    note: str = ""
    warning: bool = False

    @property
    def mode(self) -> str:
        """``volume`` or ``stream``."""
        return "stream" if self.volume is None else "volume"

    def describe(self) -> str:
        """One line for preflight (``sandbox.staging``)."""
        if self.volume is None:
            return f"streamed through the API server, once per attempt ({self.note})"
        return (
            f"volume {self.source} (read-only), written once per workspace by the controller "
            f"at {self.cache_dir} ({self.note}); nothing is streamed through the API server"
        )


def describe_volume(volume: Mapping[str, Any]) -> str:
    """A volume source for messages.

    >>> describe_volume({"persistentVolumeClaim": {"claimName": "ws"}})
    'pvc/ws'
    >>> describe_volume({"nfs": {"server": "nfs.local", "path": "/exports"}})
    'nfs nfs.local:/exports'
    """
    if "persistentVolumeClaim" in volume:
        return f"pvc/{volume['persistentVolumeClaim'].get('claimName')}"
    if "nfs" in volume:
        return f"nfs {volume['nfs'].get('server')}:{volume['nfs'].get('path')}"
    if "hostPath" in volume:
        return f"hostPath {volume['hostPath'].get('path')}"
    return next(iter(volume), "volume")


def claim_volume(name: str) -> dict[str, Any]:
    """The volume source of a claim, read-only."""
    return {"persistentVolumeClaim": {"claimName": name, "readOnly": True}}


_cache: dict[tuple[Any, ...], tuple[float, Staging]] = {}
_lock = threading.Lock()


def resolve_staging(opts: KubernetesOptions, api: Callable[[], KubeApi]) -> Staging:
    """How workspaces reach pods under ``opts`` (see the module docstring).

    ``api`` gives the client (called only when the cluster must be asked). The answer is
    kept for ``RESOLVE_SECONDS`` per process.

    Raises:
        ConfigError: a claim is named, but neither its annotation nor
            ``workspace_cache_dir`` says where the controller sees it.
    """
    wanted = opts.workspace_volume
    if wanted is None or wanted == "stream":
        return Staging(
            volume=None,
            cache_dir=opts.workspace_cache_dir,
            note="sandbox.options.workspace_volume: stream",
        )
    if isinstance(wanted, Mapping):
        return Staging(
            volume=wanted,
            cache_dir=opts.workspace_cache_dir,
            source=describe_volume(wanted),
            note="sandbox.options.workspace_volume",
        )
    key = (
        opts.client_settings,
        opts.namespace,
        wanted,
        opts.workspace_cache_dir,
    )
    now = time.monotonic()
    with _lock:
        held = _cache.get(key)
    if held is not None and now - held[0] < RESOLVE_SECONDS:
        return held[1]
    staging = _ask(opts, wanted, api())
    with _lock:
        _cache[key] = (now, staging)
    return staging


def _ask(opts: KubernetesOptions, wanted: str, api: KubeApi) -> Staging:
    ns = opts.namespace
    if wanted != "auto":
        try:
            claim = api.read_claim(ns, wanted)
        except ApiCallError:
            claim = {}  # a missing claim is preflight's sandbox.volume failure
        path = _controller_path(claim) or opts.workspace_cache_dir
        if not path:
            raise ConfigError(
                f"kubernetes sandbox backend: workspace_volume {wanted!r} needs "
                f"workspace_cache_dir (where this controller mounts the claim) or the claim's "
                f"{CONTROLLER_PATH_ANNOTATION} annotation"
            )
        return Staging(
            volume=claim_volume(wanted),
            cache_dir=path,
            source=f"pvc/{wanted}",
            note="sandbox.options.workspace_volume",
        )
    try:
        claims = api.list_claims(ns, f"{CLAIM_LABEL}=true")
    except ApiCallError as exc:
        return Staging(
            volume=None,
            cache_dir=opts.workspace_cache_dir,
            note=f"cannot list the claims of {ns}: {exc.detail or exc}; {STREAM_FIX}",
            warning=exc.cause == "rbac",
        )
    names = sorted(c["metadata"]["name"] for c in claims)
    if not names:
        return Staging(
            volume=None,
            cache_dir=opts.workspace_cache_dir,
            note=f"no claim of {ns} is labelled {CLAIM_LABEL}=true; {STREAM_FIX}",
        )
    if len(names) > 1:
        return Staging(
            volume=None,
            cache_dir=opts.workspace_cache_dir,
            note=f"{len(names)} claims of {ns} are labelled {CLAIM_LABEL}=true "
            f"({', '.join(names)}): name one in sandbox.options.workspace_volume",
            warning=True,
        )
    claim = next(c for c in claims if c["metadata"]["name"] == names[0])
    phase = (claim.get("status") or {}).get("phase") or "Pending"
    if phase != "Bound":
        return Staging(
            volume=None,
            cache_dir=opts.workspace_cache_dir,
            note=f"claim {names[0]} is labelled {CLAIM_LABEL}=true but is {phase}, not "
            "Bound (its PersistentVolume dataspace-workspaces is missing? see k8s/README.md)",
            warning=True,
        )
    path = _controller_path(claim) or opts.workspace_cache_dir
    if not path or not os.path.isdir(path):
        return Staging(
            volume=None,
            cache_dir=opts.workspace_cache_dir,
            note=f"claim {names[0]} is labelled {CLAIM_LABEL}=true but this controller does "
            f"not see its storage at {path or '(no path)'}: mount it there (its "
            f"{CONTROLLER_PATH_ANNOTATION} annotation, or sandbox.options.workspace_cache_dir)",
            warning=True,
        )
    return Staging(
        volume=claim_volume(names[0]),
        cache_dir=path,
        source=f"pvc/{names[0]}",
        note=f"the claim labelled {CLAIM_LABEL}=true",
    )


def _controller_path(claim: Mapping[str, Any]) -> str | None:
    notes = (claim.get("metadata") or {}).get("annotations") or {}
    return notes.get(CONTROLLER_PATH_ANNOTATION) or None


__all__ = [
    "CLAIM_LABEL",
    "CONTROLLER_PATH_ANNOTATION",
    "Staging",
    "claim_volume",
    "describe_volume",
    "resolve_staging",
]
