"""The file store: a folder on a local (or mounted) filesystem, the embedded default.

Every write goes to a temporary file in the destination folder, is flushed and fsynced,
then renamed over the key with ``os.replace``: a reader sees the old file or the whole new
one. A write-once put (``overwrite=False``) publishes the temporary file with ``os.link``,
which fails when the key exists, so two racing writers cannot both succeed. On filesystems
without hard links it falls back to creating the key with ``O_EXCL`` and writing in place
(still race-safe, but a concurrent reader may then see a partial file).

Temporary files are named ``.dstmp-<random>`` and are never listed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import quote

from dataspace.errors import AlreadyExistsError, NotFoundError, StoreError
from dataspace.store.keys import TEMP_MARK, check_key, folder_prefix, join_uri
from dataspace.store.uris import build_options, file_uri_path

logger = logging.getLogger(__name__)

_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}
_MKDIR_RETRIES = 3


@dataclass(frozen=True, kw_only=True)
class FileOptions:
    """Options of the file store.

    Attributes:
        fsync: flush file data and the folder entry to disk before a write returns.
            Turning it off is faster and still atomic, but a power loss may lose writes.
    """

    fsync: bool = True


def write_atomic(
    path: Path,
    fill: Callable[[BinaryIO], object],
    *,
    overwrite: bool = True,
    fsync: bool = True,
    name: str | None = None,
) -> None:
    """Create ``path`` atomically from what ``fill`` writes into a temporary file.

    Args:
        path: the final file; its parent folders are created.
        fill: writes the content into the open temporary file.
        overwrite: when False, raise ``AlreadyExistsError`` if ``path`` exists.
        fsync: fsync the file and its folder.
        name: how to name the destination in messages (defaults to ``path``).

    Raises:
        AlreadyExistsError: ``overwrite`` is False and ``path`` exists.
        StoreError: the filesystem refused the write.
    """
    label = name or str(path)
    tmp = _create_temp(path.parent, label)
    try:
        with open(tmp, "wb") as fh:
            fill(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            _publish_once(tmp, path, label, fsync=fsync)
        if fsync:
            _fsync_dir(path.parent)
    except IsADirectoryError as exc:
        raise StoreError(f"{label}: a folder of that name exists, cannot write a file") from exc
    except NotADirectoryError as exc:
        raise StoreError(f"{label}: part of the path is a file, not a folder") from exc
    except AlreadyExistsError:
        raise
    except OSError as exc:
        raise StoreError(f"{label}: write failed: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _create_temp(folder: Path, label: str) -> Path:
    # A concurrent delete may prune the folder between mkdir and open: try again.
    for attempt in range(_MKDIR_RETRIES):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = folder / f"{TEMP_MARK}{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            os.close(fd)
            return tmp
        except FileNotFoundError:
            if attempt == _MKDIR_RETRIES - 1:
                raise StoreError(f"{label}: folder {folder} vanished during the write") from None
        except FileExistsError as exc:
            raise StoreError(f"{label}: {folder} is a file, not a folder") from exc
        except NotADirectoryError as exc:
            raise StoreError(f"{label}: part of the path is a file, not a folder") from exc
        except OSError as exc:
            raise StoreError(f"{label}: cannot create a file in {folder}: {exc}") from exc
    raise AssertionError("unreachable")


def _publish_once(tmp: Path, path: Path, label: str, *, fsync: bool) -> None:
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise AlreadyExistsError(f"{label}: already exists and is written once") from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
    logger.debug("%s: no hard links on this filesystem, using O_EXCL", label)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise AlreadyExistsError(f"{label}: already exists and is written once") from None
    with os.fdopen(fd, "wb") as out, open(tmp, "rb") as src:
        shutil.copyfileobj(src, out, 1024 * 1024)
        out.flush()
        if fsync:
            os.fsync(out.fileno())


def _copy(src: BinaryIO, dst: BinaryIO) -> None:
    """Copy an open file into another with sendfile when the kernel allows it."""
    try:
        in_fd, out_fd = src.fileno(), dst.fileno()
        start = src.tell()
    except (OSError, AttributeError, ValueError):
        shutil.copyfileobj(src, dst, 1024 * 1024)
        return
    dst.flush()
    offset = start
    while True:
        try:
            sent = os.sendfile(out_fd, in_fd, offset, 1 << 30)
        except OSError as exc:
            # Not every file pair supports sendfile; that shows on the first call.
            if offset == start and exc.errno in (errno.EINVAL, errno.ENOSYS):
                shutil.copyfileobj(src, dst, 1024 * 1024)
                return
            raise
        if sent == 0:
            return
        offset += sent


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on folders; the rename is still atomic
    finally:
        os.close(fd)


class FileStore:
    """A store rooted at a local folder (``file:///abs/path``).

    Args:
        root: the folder; created on the first write.
        options: see ``FileOptions``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     store = FileStore(Path(tmp))
    ...     store.put_bytes("a/b.txt", b"hi")
    ...     list(store.list())
    ['a/b.txt']
    """

    def __init__(self, root: Path, *, options: FileOptions | None = None) -> None:
        self.root = Path(root).expanduser().absolute()
        self.options = options or FileOptions()
        self.uri = self.root.as_uri()

    @classmethod
    def from_uri(cls, uri: str, **options: object) -> FileStore:
        """Open ``file:///abs/path`` or a plain path with ``FileOptions`` fields."""
        return cls(file_uri_path(uri), options=build_options(FileOptions, options, uri=uri))

    def __repr__(self) -> str:
        return f"FileStore({self.uri!r})"

    def _path(self, key: str) -> Path:
        return self.root / check_key(key, where=self.uri)

    def url_for(self, key: str) -> str:
        """The full ``file://`` URI of ``key``."""
        return join_uri(self.uri, quote(check_key(key, where=self.uri)))

    def local_path(self, key: str) -> Path | None:
        """The path of ``key`` on disk (it may not exist yet)."""
        return self._path(key)

    def put_bytes(self, key: str, data: bytes, *, overwrite: bool = True) -> None:
        """Write ``data`` at ``key`` atomically (see the module docstring)."""
        path = self._path(key)
        payload = bytes(data)
        write_atomic(
            path,
            lambda fh: fh.write(payload),
            overwrite=overwrite,
            fsync=self.options.fsync,
            name=self.url_for(key),
        )

    def put_file(self, key: str, path: Path, *, overwrite: bool = True) -> None:
        """Copy the local file ``path`` to ``key`` atomically."""
        dest = self._path(key)
        try:
            src = open(path, "rb")  # noqa: SIM115 - closed below, after the atomic write
        except OSError as exc:
            raise StoreError(f"{path}: cannot upload to {self.url_for(key)}: {exc}") from exc
        with src:
            write_atomic(
                dest,
                lambda fh: _copy(src, fh),
                overwrite=overwrite,
                fsync=self.options.fsync,
                name=self.url_for(key),
            )

    def get_bytes(self, key: str) -> bytes:
        """Read the whole file at ``key``.

        Raises:
            NotFoundError: no file at ``key``.
        """
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFoundError(f"{self.url_for(key)}: no such object") from None
        except OSError as exc:
            raise StoreError(f"{self.url_for(key)}: read failed: {exc}") from exc

    def get_file(self, key: str, dest: Path) -> None:
        """Copy ``key`` to the local file ``dest`` atomically (parents created).

        Raises:
            NotFoundError: no file at ``key``.
        """
        path = self._path(key)
        try:
            src = open(path, "rb")  # noqa: SIM115 - closed below, after the atomic write
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFoundError(f"{self.url_for(key)}: no such object") from None
        except OSError as exc:
            raise StoreError(f"{self.url_for(key)}: read failed: {exc}") from exc
        with src:
            write_atomic(
                Path(dest),
                lambda fh: _copy(src, fh),
                fsync=False,
                name=str(dest),
            )

    def exists(self, key: str) -> bool:
        """Whether a file exists at ``key``."""
        return self._path(key).is_file()

    def list(self, prefix: str = "") -> Iterator[str]:
        """Yield every key under the folder ``prefix``, sorted, lazily, skipping temp files."""
        folder = folder_prefix(prefix, where=self.uri)
        start = self.root / folder if folder else self.root
        yield from _walk_sorted(start, folder)

    def delete(self, key: str) -> None:
        """Delete the file at ``key``; a missing key is not an error."""
        path = self._path(key)
        try:
            path.unlink()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return
        except OSError as exc:
            raise StoreError(f"{self.url_for(key)}: delete failed: {exc}") from exc
        self._prune(path.parent)

    def delete_prefix(self, prefix: str) -> int:
        """Delete every file under the folder ``prefix``; returns how many."""
        folder = folder_prefix(prefix, where=self.uri)
        count = 0
        for key in list(self.list(folder)):
            try:
                (self.root / key).unlink()
                count += 1
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"{self.url_for(key)}: delete failed: {exc}") from exc
        start = self.root / folder if folder else self.root
        _remove_empty_folders(start, keep=self.root)
        self._prune(start.parent if folder else self.root)
        return count

    def close(self) -> None:
        """Nothing to release; present so every store can be closed alike."""

    def _prune(self, folder: Path) -> None:
        # Remove folders left empty by deletes, up to (not including) the root.
        while folder != self.root and self.root in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent


def _walk_sorted(folder: Path, rel: str) -> Iterator[str]:
    """Yield file keys under ``folder`` in the byte order of their full key.

    Sibling entries are ordered by ``name + "/"`` for folders and ``name`` for files, which
    is the order of the full keys: every key inside folder ``d`` starts with ``d/``.
    """
    try:
        with os.scandir(folder) as it:
            entries = []
            for entry in it:
                if entry.name.startswith(TEMP_MARK):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    entries.append((entry.name + "/", entry.name, True))
                elif entry.is_file():
                    entries.append((entry.name, entry.name, False))
    except (FileNotFoundError, NotADirectoryError):
        return
    entries.sort()
    for _, name, is_dir in entries:
        if is_dir:
            yield from _walk_sorted(folder / name, f"{rel}{name}/")
        else:
            yield f"{rel}{name}"


def _remove_empty_folders(start: Path, *, keep: Path) -> None:
    if not start.is_dir():
        return
    for dirpath, _dirnames, _files in os.walk(start, topdown=False):
        if Path(dirpath) == keep:
            continue
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)
