"""The ``kubernetes`` sandbox backend: one locked-down pod per attempt.

``backend.py`` holds the backend and its sandboxes (its docstring tells the design); the
private modules are its parts: ``_options.py`` (the backend's options), ``_pod.py`` (the pod
manifest and how a pod's state reads), ``_api.py`` (API calls, retries and refusals),
``_exec.py`` and ``_helper.py`` (the in-pod helper run over the exec websocket),
``_slots.py`` (creation and deletion slots, shared through a Ray actor in a job) and
``_preflight.py`` (what an attempt's pod will meet). Workspaces are staged through the
shared ``dataspace.sandbox.staging``.
"""

from __future__ import annotations

from dataspace.sandbox.kubernetes.backend import (
    BASE_PATH,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
    NATIVE_HARNESS_LABEL,
    RELAY_ADDRESS_FIX,
    RELAY_PORTS,
    KubernetesBackend,
    KubernetesOptions,
    KubernetesSandbox,
    PodFailedError,
    extract_outputs,
    workspace_mount,
)

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
