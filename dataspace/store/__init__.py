"""Stores: one interface (``Store``) over ``file://``, ``s3://`` and ``memory://`` URIs.

Open a store from its URI; a plain path (no scheme) means a local folder::

    store = open_store("s3://bench/releases/v1", endpoint_url="http://127.0.0.1:9000")
    store.put_bytes("output/task_1/gold.csv", data, overwrite=False)

Backends are registered by scheme and imported only when opened, so ``s3://`` needs boto3
only when it is used. Keys are relative POSIX paths; prefixes name folders (see
``dataspace.store.keys``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataspace.errors import ConfigError
from dataspace.store.base import Store
from dataspace.store.local import FileOptions, FileStore
from dataspace.store.memory import MemoryStore
from dataspace.store.s3 import S3Options, S3Store
from dataspace.store.uris import uri_scheme

logger = logging.getLogger(__name__)

StoreFactory = Callable[..., Store]


@dataclass(frozen=True, kw_only=True)
class Backend:
    """A store backend registered under a URI scheme.

    Attributes:
        scheme: the URI scheme (``s3``).
        target: ``module:attribute`` of a ``(uri, **options) -> Store`` factory, imported
            when the scheme is first opened.
        requires: the package the backend needs beyond the core library, if any.
        install: how to install it.
    """

    scheme: str
    target: str
    requires: str | None = None
    install: str | None = None


_BACKENDS: dict[str, Backend] = {}


def register_store(
    scheme: str, target: str, *, requires: str | None = None, install: str | None = None
) -> None:
    """Register (or replace) the backend of ``scheme``.

    Args:
        scheme: the URI scheme, matched case-insensitively.
        target: ``module:attribute`` naming the factory, e.g.
            ``dataspace.store.s3:S3Store.from_uri``.
        requires: the package the backend needs, named when it is missing.
        install: how to install that package.
    """
    key = scheme.lower()
    _BACKENDS[key] = Backend(scheme=key, target=target, requires=requires, install=install)


def known_schemes() -> list[str]:
    """The registered schemes, sorted.

    >>> known_schemes()
    ['file', 'memory', 's3']
    """
    return sorted(_BACKENDS)


def _describe_known() -> str:
    parts = []
    for name in known_schemes():
        backend = _BACKENDS[name]
        parts.append(f"{name} ({_hint(backend)})" if backend.requires else name)
    return ", ".join(parts)


def _hint(backend: Backend) -> str:
    return f"needs {backend.requires}" + (f": {backend.install}" if backend.install else "")


def _load(backend: Backend, uri: str) -> StoreFactory:
    module_name, _, attribute = backend.target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"; it {_hint(backend)}" if backend.requires else ""
        raise ConfigError(
            f"{uri}: the {backend.scheme}:// store cannot be loaded ({exc}){hint}"
        ) from exc
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def open_store(uri: str, **options: Any) -> Store:
    """Open the store at ``uri`` with backend-specific keyword options.

    Args:
        uri: ``file:///abs/path``, a plain path, ``s3://bucket/prefix`` or
            ``memory://[name]``.
        **options: fields of the backend's options (``FileOptions``, ``S3Options``).

    Returns:
        The store.

    Raises:
        ConfigError: unknown scheme, unknown option, malformed URI, or a backend whose
            dependencies are missing.

    >>> open_store("memory://doc").url_for("a/b.json")
    'memory://doc/a/b.json'
    """
    if not isinstance(uri, str) or not uri:
        raise ConfigError(f"store URI must be a non-empty string, got {uri!r}")
    scheme = uri_scheme(uri)
    backend = _BACKENDS.get(scheme)
    if backend is None:
        raise ConfigError(
            f"{uri}: unknown store scheme {scheme!r}; known schemes: {_describe_known()}; "
            "a plain path means file://"
        )
    store = _load(backend, uri)(uri, **options)
    logger.debug("opened %r", store)
    return store


register_store("file", "dataspace.store.local:FileStore.from_uri")
register_store("memory", "dataspace.store.memory:MemoryStore.from_uri")
register_store(
    "s3", "dataspace.store.s3:S3Store.from_uri", requires="boto3", install="pip install boto3"
)

__all__ = [
    "Backend",
    "FileOptions",
    "FileStore",
    "MemoryStore",
    "S3Options",
    "S3Store",
    "Store",
    "known_schemes",
    "open_store",
    "register_store",
]
