"""An in-memory store with the same semantics as the others, for tests.

``memory://`` opens a fresh, private store. ``memory://<name>`` opens the store of that
name shared by everything in this process that opens the same URI, so code that reopens a
store from its URI sees the same objects. Like S3, a key and a folder of the same name may
coexist (``a`` and ``a/b``); the file store cannot hold both.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

from dataspace.errors import AlreadyExistsError, ConfigError, NotFoundError, StoreError
from dataspace.store.keys import check_key, folder_prefix, join_uri
from dataspace.store.local import write_atomic
from dataspace.store.uris import uri_scheme

logger = logging.getLogger(__name__)


class _Space:
    """The objects of one memory store, kept with their keys in sorted order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, bytes] = {}
        self.keys: list[str] = []


_NAMED: dict[str, _Space] = {}
_NAMED_LOCK = threading.Lock()


class MemoryStore:
    """A thread-safe store held in this process's memory.

    Args:
        name: share the objects with every other ``MemoryStore`` of this name; None for a
            private store.

    >>> store = MemoryStore()
    >>> store.put_bytes("a/b.txt", b"hi")
    >>> store.get_bytes("a/b.txt")
    b'hi'
    """

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        if name is None:
            self._space = _Space()
            self.uri = f"memory://anonymous-{id(self._space):x}"
        else:
            with _NAMED_LOCK:
                self._space = _NAMED.setdefault(name, _Space())
            self.uri = f"memory://{name}"

    @classmethod
    def from_uri(cls, uri: str, **options: object) -> MemoryStore:
        """Open ``memory://`` (private) or ``memory://<name>`` (shared by name)."""
        if uri_scheme(uri) != "memory":
            raise ConfigError(f"{uri}: not a memory:// URI")
        if options:
            raise ConfigError(f"{uri}: the memory store takes no options ({', '.join(options)})")
        name = uri.partition("://")[2].strip("/")
        if "/" in name:
            raise ConfigError(f"{uri}: memory store names have no '/' (memory://<name>)")
        return cls(name or None)

    def __repr__(self) -> str:
        return f"MemoryStore({self.uri!r})"

    def url_for(self, key: str) -> str:
        """The full ``memory://`` URI of ``key``."""
        return join_uri(self.uri, check_key(key, where=self.uri))

    def local_path(self, key: str) -> Path | None:
        """Always None: memory objects have no path."""
        check_key(key, where=self.uri)
        return None

    def put_bytes(self, key: str, data: bytes, *, overwrite: bool = True) -> None:
        """Store a copy of ``data`` at ``key``."""
        check_key(key, where=self.uri)
        self._put(key, bytes(data), overwrite=overwrite)

    def put_file(self, key: str, path: Path, *, overwrite: bool = True) -> None:
        """Store the content of the local file ``path`` at ``key``."""
        check_key(key, where=self.uri)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise StoreError(f"{path}: cannot upload to {self.url_for(key)}: {exc}") from exc
        self._put(key, data, overwrite=overwrite)

    def _put(self, key: str, data: bytes, *, overwrite: bool) -> None:
        space = self._space
        with space.lock:
            if key in space.objects:
                if not overwrite:
                    raise AlreadyExistsError(
                        f"{self.url_for(key)}: already exists and is written once"
                    )
            else:
                bisect.insort(space.keys, key)
            space.objects[key] = data

    def get_bytes(self, key: str) -> bytes:
        """Read the object at ``key``.

        Raises:
            NotFoundError: no object at ``key``.
        """
        check_key(key, where=self.uri)
        with self._space.lock:
            data = self._space.objects.get(key)
        if data is None:
            raise NotFoundError(f"{self.url_for(key)}: no such object")
        return data

    def get_file(self, key: str, dest: Path) -> None:
        """Write the object at ``key`` to the local file ``dest`` atomically."""
        data = self.get_bytes(key)
        write_atomic(Path(dest), lambda fh: fh.write(data), fsync=False, name=str(dest))

    def exists(self, key: str) -> bool:
        """Whether an object exists at ``key``."""
        check_key(key, where=self.uri)
        with self._space.lock:
            return key in self._space.objects

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield every key under the folder ``prefix`` in sorted order.

        The keys are read in batches, so objects written during the iteration may or may
        not appear, as with a paginated S3 listing.
        """
        folder = folder_prefix(prefix, where=self.uri)
        space = self._space
        after: str | None = None
        while True:
            with space.lock:
                if after is None:
                    start = bisect.bisect_left(space.keys, folder)
                else:
                    start = bisect.bisect_right(space.keys, after)
                batch = space.keys[start : start + 1000]
            for key in batch:
                if not key.startswith(folder):
                    return
                yield key
            if len(batch) < 1000:
                return
            after = batch[-1]

    def delete(self, key: str) -> None:
        """Delete the object at ``key``; a missing key is not an error."""
        check_key(key, where=self.uri)
        space = self._space
        with space.lock:
            if space.objects.pop(key, None) is not None:
                del space.keys[bisect.bisect_left(space.keys, key)]

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object under the folder ``prefix``; returns how many."""
        folder = folder_prefix(prefix, where=self.uri)
        space = self._space
        with space.lock:
            lo = bisect.bisect_left(space.keys, folder)
            hi = lo
            while hi < len(space.keys) and space.keys[hi].startswith(folder):
                hi += 1
            doomed = space.keys[lo:hi]
            del space.keys[lo:hi]
            for key in doomed:
                del space.objects[key]
        return len(doomed)

    def clear(self) -> None:
        """Delete every object (of the shared space too, for a named store)."""
        with self._space.lock:
            self._space.objects.clear()
            self._space.keys.clear()

    def close(self) -> None:
        """Nothing to release; the objects stay for other stores of the same name."""
