"""Sandboxes: the contract (``base``) and a registry of backends by name.

``import dataspace.sandbox`` loads only the contract; a backend's module is imported when
it is first asked for by :func:`get_backend`.

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
    TMP_DIR,
    WORKSPACE_DIR,
    ExecResult,
    ExecStatus,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxSpec,
)

BackendFactory = Callable[..., SandboxBackend]

BACKENDS: Registry[BackendFactory] = Registry(
    "sandbox backend",
    {
        "local": "dataspace.sandbox.local:LocalBackend",
        "kubernetes": "dataspace.sandbox.kubernetes:KubernetesBackend",
    },
    plural="backends",
)


def register_backend(name: str, factory: str | BackendFactory) -> None:
    """Register a backend under ``name``.

    Args:
        name: the name run specs use (``local``, ``kubernetes``).
        factory: a callable taking the backend's keyword options, or ``"module:attr"``
            naming one, imported only when the backend is first asked for.
    """
    BACKENDS.register(name, factory)


def backend_names() -> list[str]:
    """The registered backend names, sorted."""
    return BACKENDS.names()


def get_backend(name: str, **options: object) -> SandboxBackend:
    """Create the backend registered as ``name`` with its keyword ``options``.

    Raises:
        ConfigError: unknown name (the message lists the known ones) or options the
            backend does not take.
        SandboxError: the backend cannot run on this host.
    """
    factory = BACKENDS.factory(name)
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        raise ConfigError(
            f"sandbox backend {name!r}: bad options {sorted(options)}: {exc}"
        ) from None
    return factory(**options)


__all__ = [
    "BACKENDS",
    "OUTPUT_DIR",
    "TMP_DIR",
    "WORKSPACE_DIR",
    "BackendFactory",
    "ExecResult",
    "ExecStatus",
    "Limits",
    "Sandbox",
    "SandboxBackend",
    "SandboxClosedError",
    "SandboxError",
    "SandboxSpec",
    "backend_names",
    "get_backend",
    "register_backend",
]
