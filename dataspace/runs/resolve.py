"""The one spec resolver: overrides applied and a store-URI release made local.

Both command lines (``dataspace run`` and ``python -m ray_jobs.run``) call
:func:`resolve_spec` after loading a spec: flags override the few fields that differ from
one machine to another, and a release given as a store URI (``s3://bucket/releases/v1``) is
synced once into the release cache (``DATASPACE_RELEASE_CACHE``, by default
``~/.cache/dataspace/releases``; on a cluster, a folder every Ray node sees).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataspace.errors import ConfigError, DataSpaceError
from dataspace.runs.spec import RunSpec

logger = logging.getLogger(__name__)


def default_release_cache() -> str:
    """``DATASPACE_RELEASE_CACHE``, else ``~/.cache/dataspace/releases``."""
    return os.environ.get("DATASPACE_RELEASE_CACHE") or str(
        Path("~/.cache/dataspace/releases").expanduser()
    )


@dataclass(frozen=True, kw_only=True)
class Overrides:
    """Fields a command line may override (None: keep the spec's)."""

    store: str | None = None
    release: str | None = None
    ray_address: str | None = None
    concurrency: int | None = None
    sandbox_backend: str | None = None
    sandbox_image: str | None = None
    sandbox_options: Mapping[str, Any] = field(default_factory=dict)


def resolve_spec(
    spec: RunSpec, overrides: Overrides | None = None, *, release_cache: str | None = None
) -> RunSpec:
    """The spec with ``overrides`` applied and its release a local folder.

    Raises:
        ConfigError: the release URI cannot be synced (names the URI and the cause).
    """
    o = overrides or Overrides()
    changes: dict[str, Any] = {}
    if o.store:
        changes["store"] = o.store
    release = o.release or spec.release
    changes["release"] = local_release(release, cache=release_cache or default_release_cache())
    if o.ray_address:
        changes["ray_address"] = o.ray_address
    if o.concurrency is not None:
        from dataspace.runs.spec import MAX_CONCURRENCY

        if isinstance(o.concurrency, bool) or not 1 <= o.concurrency <= MAX_CONCURRENCY:
            raise ConfigError(
                f"--concurrency: must be between 1 and {MAX_CONCURRENCY}, got {o.concurrency!r}"
            )
        changes["concurrency"] = o.concurrency
    if o.sandbox_backend or o.sandbox_image or o.sandbox_options:
        sb = spec.sandbox
        changes["sandbox"] = dataclasses.replace(
            sb,
            backend=o.sandbox_backend or sb.backend,
            image=o.sandbox_image or sb.image,
            options={**dict(sb.options), **dict(o.sandbox_options)},
        )
    return dataclasses.replace(spec, **changes)


def local_release(release: str, *, cache: str) -> str:
    """A local folder for ``release``: a path, a ``file://`` URI or a store URI (synced)."""
    if release.startswith("file://"):
        from dataspace.store.uris import file_uri_path

        return str(file_uri_path(release))
    if "://" not in release:
        return release
    from dataspace.sandbox.staging import WorkspaceCache

    try:
        synced = WorkspaceCache(cache).fetch(release)
    except DataSpaceError as exc:
        raise ConfigError(f"release {release}: cannot sync it into {cache}: {exc}") from exc
    logger.info(
        "release %s synced to %s (%d bytes fetched)", release, synced.path, synced.fetched_bytes
    )
    return str(synced.path)


__all__ = ["Overrides", "default_release_cache", "local_release", "resolve_spec"]
