"""Parsing store URIs and store options, shared by the backends and the registry."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from urllib.parse import unquote, urlsplit

from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class BucketPrefix(NamedTuple):
    """The two parts of an ``s3://bucket/prefix`` URI (prefix is ``""`` or ends in ``/``)."""

    bucket: str
    prefix: str


def uri_scheme(uri: str) -> str:
    """The lower-case scheme of ``uri``, or ``"file"`` for a plain path.

    >>> uri_scheme("s3://bucket/runs")
    's3'
    >>> uri_scheme("/data/release")
    'file'
    >>> uri_scheme("relative/folder")
    'file'
    """
    head, sep, _ = uri.partition("://")
    if not sep or not head or "/" in head:
        return "file"
    return head.lower()


def file_uri_path(uri: str) -> Path:
    """The absolute local path of ``file:///abs/path`` or of a plain path.

    Raises:
        ConfigError: the URI names a remote host or is not a file URI.

    >>> str(file_uri_path("file:///tmp/my%20store"))
    '/tmp/my store'
    >>> str(file_uri_path("/tmp/plain"))
    '/tmp/plain'
    """
    if uri_scheme(uri) != "file":
        raise ConfigError(f"{uri}: not a file URI or path")
    if "://" not in uri:
        if not uri:
            raise ConfigError("empty store path: give a folder or a file:///abs/path URI")
        return Path(uri).expanduser().absolute()
    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        raise ConfigError(
            f"{uri}: file URIs name a local folder (file:///abs/path), not host {parts.netloc!r}"
        )
    if parts.query or parts.fragment:
        raise ConfigError(f"{uri}: file URIs take no query or fragment")
    path = unquote(parts.path)
    if not path.startswith("/"):
        raise ConfigError(f"{uri}: file URIs need an absolute path (file:///abs/path)")
    return Path(path)


def split_s3_uri(uri: str) -> BucketPrefix:
    """Split ``s3://bucket/prefix`` into bucket and folder prefix.

    Raises:
        ConfigError: not an ``s3://`` URI, or no bucket.

    >>> split_s3_uri("s3://bench/runs/v1")
    BucketPrefix(bucket='bench', prefix='runs/v1/')
    >>> split_s3_uri("s3://bench")
    BucketPrefix(bucket='bench', prefix='')
    """
    if uri_scheme(uri) != "s3":
        raise ConfigError(f"{uri}: not an s3://bucket/prefix URI")
    rest = uri.partition("://")[2]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigError(f"{uri}: no bucket (expected s3://bucket/prefix)")
    if "?" in rest or "#" in rest:
        raise ConfigError(f"{uri}: s3 URIs take no query or fragment")
    prefix = prefix.strip("/")
    if prefix:
        from dataspace.store.keys import key_problem

        problem = key_problem(prefix)
        if problem is not None:
            raise ConfigError(f"{uri}: invalid prefix {prefix!r}: {problem}")
        prefix += "/"
    return BucketPrefix(bucket, prefix)


def build_options(cls: type[T], options: Mapping[str, Any], *, uri: str) -> T:
    """Build the options dataclass ``cls`` from keyword options, naming unknown ones.

    Raises:
        ConfigError: an option is unknown or has the wrong type.
    """
    assert dataclasses.is_dataclass(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(
            f"{uri}: unknown store option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}"
        )
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{uri}: bad store options: {exc}") from exc
