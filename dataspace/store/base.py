"""The storage contract shared by every backend.

Keys are POSIX-style relative paths (``runs/r1/attempts/gold/task_1/1/run.json``); no
leading slash, no ``..`` segments. A store is opened from a URI (``file:///abs/path`` or
``s3://bucket/prefix``) and every key is relative to that root.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, runtime_checkable


@runtime_checkable
class Store(Protocol):
    """Object storage over one root URI.

    Writes are atomic: a reader sees the old object or the whole new one, never a part.
    With ``overwrite=False`` a write to an existing key raises ``AlreadyExistsError``.
    Reads of a missing key raise ``NotFoundError`` naming the URI. A malformed key raises
    ``StoreError`` naming it. A prefix names a folder: ``list("runs/r1")`` never yields
    keys of ``runs/r10/``.
    """

    uri: str

    def put_bytes(self, key: str, data: bytes, *, overwrite: bool = True) -> None:
        """Write ``data`` at ``key`` atomically."""
        ...

    def put_file(self, key: str, path: Path, *, overwrite: bool = True) -> None:
        """Upload a local file (multipart for large files on S3)."""
        ...

    def get_bytes(self, key: str) -> bytes:
        """Read the whole object at ``key``."""
        ...

    def get_file(self, key: str, dest: Path) -> None:
        """Download the object at ``key`` to ``dest`` (atomically, parents created)."""
        ...

    def exists(self, key: str) -> bool:
        """Whether an object exists at ``key``."""
        ...

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield every key under ``prefix`` (recursive, sorted, paginated lazily)."""
        ...

    def delete(self, key: str) -> None:
        """Delete one object; deleting a missing key is not an error."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under ``prefix``; returns how many were deleted."""
        ...

    def local_path(self, key: str) -> Path | None:
        """A local filesystem path for ``key`` when the backend has one (file://), else None."""
        ...

    def url_for(self, key: str) -> str:
        """The full URI of ``key`` (for messages and reports)."""
        ...

    def close(self) -> None:
        """Release connections and threads; the store may not be used afterwards."""
        ...
