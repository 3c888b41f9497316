"""Workspaces for sandbox pods: a cache the controller fills once per volume, tars to stream.

Sandbox pods have no network, so they never fetch anything: the controller (which can reach
the store) puts each workspace in a cache folder once, and every attempt of that workspace
reuses it. With a shared volume (a ReadWriteMany claim, or a node-local ``hostPath`` when
the controller and its sandboxes share a node) the pod mounts the cached folder read-only
by ``subPath``; without one, the controller streams a tar of the cached folder into the
pod. Cache entries are written to a temporary folder and renamed into place, under a file
lock, so concurrent controllers on one volume download a workspace once and never see half
of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from dataspace.errors import SandboxError

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class CachedWorkspace:
    """A workspace folder available to the controller.

    Attributes:
        path: the folder.
        sub_path: its path relative to the cache root ("" when outside the cache).
        key: the cache key (content listing digest, or the URI's digest).
        files: number of regular files.
        size_bytes: their total size.
        fetched_bytes: bytes copied or downloaded now (0 on a cache hit).
        seconds: time spent.
    """

    path: Path
    sub_path: str
    key: str
    files: int
    size_bytes: int
    fetched_bytes: int
    seconds: float

    @property
    def cache_hit(self) -> bool:
        """Whether nothing was fetched for this use."""
        return self.fetched_bytes == 0


def folder_digest(root: Path) -> tuple[str, int, int]:
    """Digest of a folder's listing (names, sizes, mtimes), file count and total size."""
    h = hashlib.sha256()
    files = size = 0
    for path in sorted(_regular_files(root)):
        st = path.stat()
        rel = path.relative_to(root).as_posix()
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        files += 1
        size += st.st_size
    return h.hexdigest()[:32], files, size


def _regular_files(root: Path) -> Iterator[Path]:
    for base, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(base) / name
            if path.is_file() and not path.is_symlink():
                yield path


class WorkspaceCache:
    """A cache folder of workspaces, keyed by content (folders) or by URI (store prefixes).

    Args:
        root: the cache folder (on the shared volume for the volume mode).
    """

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def fetch(self, workspace: Path | str, *, copy_local: bool = True) -> CachedWorkspace:
        """Make ``workspace`` (a folder or a store URI) available under the cache.

        Args:
            workspace: a local folder, a ``file://`` URI or a store URI (``s3://...``).
            copy_local: copy a local folder that lies outside the cache into it (needed
                when pods mount the cache; not when the controller streams a tar).

        Raises:
            SandboxError: the folder does not exist or the store cannot be read.
        """
        started = time.monotonic()
        text = str(workspace)
        if "://" in text and not text.startswith("file://"):
            return self._fetch_uri(text, started)
        if text.startswith("file://"):
            from dataspace.store.uris import file_uri_path

            workspace = file_uri_path(text)
        src = Path(workspace).resolve()
        if not src.is_dir():
            raise SandboxError(f"sandbox workspace {src}: not a folder")
        key, files, size = folder_digest(src)
        root = self.root.resolve()
        if src.is_relative_to(root) or not copy_local:
            sub_path = src.relative_to(root).as_posix() if src.is_relative_to(root) else ""
            return CachedWorkspace(
                path=src,
                sub_path=sub_path,
                key=key,
                files=files,
                size_bytes=size,
                fetched_bytes=0,
                seconds=time.monotonic() - started,
            )
        dest = root / "ws" / key

        def fill(tmp: Path) -> int:
            shutil.copytree(src, tmp, symlinks=False, dirs_exist_ok=True, ignore=_skip_links)
            return size

        fetched = self._populate(dest, key, fill)
        return CachedWorkspace(
            path=dest,
            sub_path=dest.relative_to(root).as_posix(),
            key=key,
            files=files,
            size_bytes=size,
            fetched_bytes=fetched,
            seconds=time.monotonic() - started,
        )

    def _fetch_uri(self, uri: str, started: float) -> CachedWorkspace:
        from dataspace.store import open_store

        key = hashlib.sha256(uri.encode()).hexdigest()[:32]
        root = self.root.resolve()
        dest = root / "uri" / key

        def fill(tmp: Path) -> int:
            store = open_store(uri)
            total = 0
            for rel in store.list(""):
                target = tmp / rel
                store.get_file(rel, target)
                total += target.stat().st_size
            return total

        try:
            fetched = self._populate(dest, key, fill)
        except SandboxError:
            raise
        except Exception as exc:
            raise SandboxError(f"sandbox workspace {uri}: cannot download: {exc}") from exc
        _, files, size = folder_digest(dest)
        return CachedWorkspace(
            path=dest,
            sub_path=dest.relative_to(root).as_posix(),
            key=key,
            files=files,
            size_bytes=size,
            fetched_bytes=fetched,
            seconds=time.monotonic() - started,
        )

    def _populate(self, dest: Path, key: str, fill: object) -> int:
        """Fill ``dest`` once (temp folder + rename, under a lock); bytes fetched now."""
        if dest.is_dir():
            return 0
        locks = self.root / ".locks"
        locks.mkdir(parents=True, exist_ok=True)
        with _locked(locks / f"{key}.lock"):
            if dest.is_dir():
                return 0
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.parent / f".tmp-{key}-{uuid.uuid4().hex[:8]}"
            tmp.mkdir()
            try:
                fetched = int(fill(tmp))  # type: ignore[operator]
                _make_readable(tmp)
                os.rename(tmp, dest)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            logger.info("workspace cache: stored %s (%d bytes)", dest, fetched)
            return fetched

    def tar_path(self, cached: CachedWorkspace) -> Path:
        """A tar of the cached workspace (built once per key), for streaming into pods."""
        tars = self.root / "tar"
        tars.mkdir(parents=True, exist_ok=True)
        dest = tars / f"{cached.key}.tar"
        if dest.is_file():
            return dest
        with _locked(self.root / ".locks" / f"{cached.key}.tar.lock"):
            if dest.is_file():
                return dest
            fd, tmp = tempfile.mkstemp(dir=tars, prefix=".tmp-", suffix=".tar")
            try:
                with os.fdopen(fd, "wb") as handle:
                    write_tar(cached.path, handle)
                os.rename(tmp, dest)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        return dest


def write_tar(root: Path, handle: object) -> None:
    """Write a tar of ``root``'s folders and regular files (links skipped) to ``handle``."""
    with tarfile.open(fileobj=handle, mode="w:", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for base, dirs, names in os.walk(root):
            dirs.sort()
            rel_base = Path(base).relative_to(root)
            for name in dirs:
                path = Path(base) / name
                if not path.is_symlink():
                    info = tarfile.TarInfo((rel_base / name).as_posix())
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            for name in sorted(names):
                path = Path(base) / name
                if path.is_symlink() or not path.is_file():
                    continue
                info = tarfile.TarInfo((rel_base / name).as_posix())
                st = path.stat()
                info.size, info.mtime, info.mode = st.st_size, int(st.st_mtime), 0o444
                with open(path, "rb") as source:
                    tar.addfile(info, source)


def _skip_links(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if os.path.islink(os.path.join(folder, n))]


def _make_readable(root: Path) -> None:
    """World-readable files and folders: sandbox pods run as another user."""
    for base, dirs, names in os.walk(root):
        for name in dirs:
            os.chmod(os.path.join(base, name), 0o755)
        for name in names:
            path = os.path.join(base, name)
            if not os.path.islink(path):
                os.chmod(path, 0o444)
    os.chmod(root, 0o755)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def extract_outputs(archive: bytes, dest: Path, budget: int) -> list[Path]:
    """Unpack the helper's tar of /output into ``dest``: regular files only, size-limited.

    The archive comes from the sandbox, so it is untrusted: absolute names, ``..``, links and
    devices are skipped, and files past ``budget`` bytes in total are dropped.
    """
    import io

    out: list[Path] = []
    root = dest.resolve()
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            rel = PurePosixPath(member.name)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                logger.warning("collect: unsafe name %r skipped", member.name)
                continue
            if member.size > budget:
                logger.warning(
                    "collect: %s (%d bytes) is past the output limit; skipped",
                    member.name,
                    member.size,
                )
                continue
            target = root.joinpath(*rel.parts)
            if not target.resolve().is_relative_to(root):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None
            with open(target, "wb") as sink:
                while chunk := source.read(1024 * 1024):
                    sink.write(chunk)
            budget -= member.size
            out.append(target)
    return out


__all__ = ["CachedWorkspace", "WorkspaceCache", "extract_outputs", "folder_digest", "write_tar"]
