"""Sandboxes: the contract (``base``) and a registry of backends by name.

``import dataspace.sandbox`` loads only the contract; a backend's subpackage is imported
when it is first asked for by :func:`get_backend` or :func:`backend_class`. Each backend
is a :class:`SandboxBackend` subclass in ``dataspace/sandbox/<name>/``.

>>> "local" in backend_names()
True
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from dataspace.errors import ConfigError, SandboxClosedError, SandboxError
from dataspace.registry import Registry
from dataspace.sandbox.base import (
    OUTPUT_DIR,
    RELAY_DIR,
    TMP_DIR,
    WORKSPACE_DIR,
    ExecPlan,
    ExecResult,
    ExecStatus,
    Limits,
    PreflightRequest,
    RelayTransport,
    RuntimeChange,
    Sandbox,
    SandboxBackend,
    SandboxSpec,
)

BackendFactory = Callable[..., SandboxBackend]
DEFAULT_BACKEND = "local"
"""The backend of a run spec that names none (and of ``dataspace doctor``)."""
CLUSTER_BACKEND = "kubernetes"
"""The backend of the cluster deployment (``k8s/``): what ``ray_jobs.sweep`` cleans up."""

BACKENDS: Registry[BackendFactory] = Registry(
    "sandbox backend",
    {
        "local": "dataspace.sandbox.local:LocalBackend",
        "kubernetes": "dataspace.sandbox.kubernetes:KubernetesBackend",
        "docker": "dataspace.sandbox.docker:DockerBackend",
    },
    plural="backends",
)


def register_backend(name: str, factory: str | BackendFactory) -> None:
    """Register a backend under ``name``.

    Args:
        name: the name run specs use (``local``, ``kubernetes``).
        factory: a ``SandboxBackend`` subclass (its keyword options are the spec's
            ``sandbox.options``), or ``"module:Class"`` naming one, imported only when the
            backend is first asked for.
    """
    BACKENDS.register(name, factory)


def backend_names() -> list[str]:
    """The registered backend names, sorted."""
    return BACKENDS.names()


def backend_class(name: str) -> type[SandboxBackend]:
    """The backend class registered as ``name`` (for what it declares without an instance).

    Raises:
        ConfigError: unknown name, or what is registered is not a ``SandboxBackend``.
    """
    cls = BACKENDS.get(name)
    if not (isinstance(cls, type) and issubclass(cls, SandboxBackend)):
        raise ConfigError(
            f"sandbox backend {name!r}: registered as {cls!r}, which is not a "
            "SandboxBackend subclass (dataspace.sandbox.base)"
        )
    return cls


def get_backend(name: str, **options: object) -> SandboxBackend:
    """Create the backend registered as ``name`` with its keyword ``options``.

    Raises:
        ConfigError: unknown name (the message lists the known ones) or options the
            backend does not take.
        SandboxError: the backend cannot run on this host.
    """
    factory = backend_class(name)
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        raise ConfigError(
            f"sandbox backend {name!r}: bad options {sorted(options)}: {exc}"
        ) from None
    return factory(**options)


__all__ = [
    "BACKENDS",
    "CLUSTER_BACKEND",
    "DEFAULT_BACKEND",
    "OUTPUT_DIR",
    "RELAY_DIR",
    "TMP_DIR",
    "WORKSPACE_DIR",
    "BackendFactory",
    "ExecPlan",
    "ExecResult",
    "ExecStatus",
    "Limits",
    "PreflightRequest",
    "RelayTransport",
    "RuntimeChange",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosedError",
    "SandboxError",
    "SandboxSpec",
    "backend_class",
    "backend_names",
    "get_backend",
    "register_backend",
]
