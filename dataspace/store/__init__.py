"""Stores: one interface (``Store``) over ``file://``, ``s3://`` and ``memory://`` URIs.

Open a store from its URI; a plain path (no scheme) means a local folder::

    store = open_store("s3://bench/releases/v1", endpoint_url="http://127.0.0.1:9000")
    store.put_bytes("output/task_1/gold.csv", data, overwrite=False)

Backends are registered by scheme and imported only when opened, so ``s3://`` needs boto3
only when it is used. Keys are relative POSIX paths; prefixes name folders (see
``dataspace.store.keys``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dataspace.errors import ConfigError
from dataspace.registry import Registry
from dataspace.store.base import Store
from dataspace.store.uris import uri_scheme

if TYPE_CHECKING:
    from dataspace.store.local import FileOptions, FileStore
    from dataspace.store.memory import MemoryStore
    from dataspace.store.s3 import S3Options, S3Store

logger = logging.getLogger(__name__)

StoreFactory = Callable[..., Store]


STORES: Registry[StoreFactory] = Registry(
    "store",
    {
        "file": "dataspace.store.local:FileStore.from_uri",
        "memory": "dataspace.store.memory:MemoryStore.from_uri",
        "s3": "dataspace.store.s3:S3Store.from_uri",
    },
    hints={"s3": "needs boto3: pip install boto3"},
    plural="schemes",
)
"""URI scheme -> a ``(uri, **options) -> Store`` factory, imported when first opened."""


def register_store(scheme: str, target: str | StoreFactory, *, install: str | None = None) -> None:
    """Register (or replace) the backend of ``scheme``.

    Args:
        scheme: the URI scheme, matched case-insensitively.
        target: the factory, or ``module:attribute`` naming it, e.g.
            ``dataspace.store.s3:S3Store.from_uri``.
        install: what the backend needs and how to install it, named when it is missing.
    """
    STORES.register(scheme.lower(), target, hint=install or "")


def known_schemes() -> list[str]:
    """The registered schemes, sorted.

    >>> known_schemes()
    ['file', 'memory', 's3']
    """
    return STORES.names()


def _describe_known() -> str:
    return ", ".join(
        f"{name} ({hint})" if (hint := STORES.hint(name)) else name for name in known_schemes()
    )


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
    if scheme not in STORES:
        raise ConfigError(
            f"{uri}: unknown store scheme {scheme!r}; known schemes: {_describe_known()}; "
            "a plain path means file://"
        )
    try:
        factory = STORES.factory(scheme)
    except ConfigError as exc:
        raise ConfigError(f"{uri}: the {scheme}:// store cannot be loaded ({exc})") from None
    store = factory(uri, **options)
    logger.debug("opened %r", store)
    return store


# The backends' classes, importable from here but loaded only when first used.
_LAZY = {
    "FileOptions": "dataspace.store.local",
    "FileStore": "dataspace.store.local",
    "MemoryStore": "dataspace.store.memory",
    "S3Options": "dataspace.store.s3",
    "S3Store": "dataspace.store.s3",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dataspace.store' has no attribute {name!r}")


__all__ = [
    "STORES",
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
