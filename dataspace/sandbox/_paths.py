"""Safe file access under a sandbox's output folder, one path component at a time.

The controller reaches the output folder from outside (for the local backend through a
descriptor opened via ``/proc/<pid>/root/output``), where an absolute symbolic link would
resolve against the *host's* root. So no link is ever followed: every component is opened with
``O_NOFOLLOW`` relative to its parent's descriptor, and ``..`` is refused before any
lookup. Failures are the ``OSError`` family a file tool reports back to its caller:
``PermissionError`` for an escape or a link, ``FileNotFoundError``, ``IsADirectoryError``,
and ``OSError(EFBIG)`` past a size limit.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path

from dataspace.sandbox.base import OUTPUT_DIR

logger = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK = 1024 * 1024
_MAX_DEPTH = 64


def output_parts(path: str) -> tuple[str, ...]:
    """Split a path given for the output folder into its components below it.

    Absolute paths must lie under ``/output``; relative ones are taken from it.

    >>> output_parts("answer/prediction.csv")
    ('answer', 'prediction.csv')
    >>> output_parts("/output/./a//b.txt")
    ('a', 'b.txt')
    >>> output_parts("/workspace/data.csv")
    Traceback (most recent call last):
    PermissionError: /workspace/data.csv: outside /output
    >>> output_parts("a/../../etc/passwd")
    Traceback (most recent call last):
    PermissionError: a/../../etc/passwd: '..' is not allowed
    """
    if "\0" in path:
        raise ValueError(f"{path!r}: NUL byte in path")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PermissionError(f"{path}: '..' is not allowed")
    if path.startswith("/"):
        if posixpath.normpath(path) != OUTPUT_DIR and not path.startswith(OUTPUT_DIR + "/"):
            raise PermissionError(f"{path}: outside {OUTPUT_DIR}")
        parts = parts[1:]
    return tuple(parts)


def _open_dir(name: str, dir_fd: int, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PermissionError(
                f"{shown}: not a folder (symbolic links are not followed)"
            ) from None
        raise type(exc)(exc.errno, f"{shown}: {exc.strerror}") from None


@dataclass(frozen=True, kw_only=True)
class OutputRoot:
    """An output folder reached through a descriptor the controller holds.

    Attributes:
        fd: a descriptor of the folder (``O_PATH`` is enough), e.g. opened once through
            ``/proc/<pid>/root/output``, so that later calls never resolve a pid again.
        owner: uid and gid to give new files and folders, or ``None`` to keep ours.
    """

    fd: int
    owner: tuple[int, int] | None = field(default=None)

    def _open_root(self) -> int:
        return os.open(".", _DIR_FLAGS, dir_fd=self.fd)

    def _walk_to_parent(self, parts: tuple[str, ...], create: bool) -> int:
        fd = self._open_root()
        try:
            for index, name in enumerate(parts[:-1]):
                where = "/".join(parts[: index + 1])
                try:
                    next_fd = _open_dir(name, fd, f"{OUTPUT_DIR}/{where}")
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):  # made by a command meanwhile
                        os.mkdir(name, 0o755, dir_fd=fd)
                    next_fd = _open_dir(name, fd, f"{OUTPUT_DIR}/{where}")
                    if self.owner is not None:
                        os.fchown(next_fd, *self.owner)
                os.close(fd)
                fd = next_fd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def read(self, path: str, max_bytes: int) -> bytes:
        """Read a regular file; ``OSError(EFBIG)`` when it holds more than ``max_bytes``."""
        parts = output_parts(path)
        if not parts:
            raise IsADirectoryError(f"{path}: is the output folder")
        parent = self._walk_to_parent(parts, create=False)
        try:
            fd = _open_file(parts[-1], parent, path)
        finally:
            os.close(parent)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise OSError(errno.EFBIG, f"{path}: larger than {max_bytes} bytes")
        return data

    def write(self, path: str, data: bytes) -> None:
        """Write a regular file, creating its parent folders."""
        parts = output_parts(path)
        if not parts:
            raise IsADirectoryError(f"{path}: is the output folder")
        parent = self._walk_to_parent(parts, create=True)
        try:
            fd = os.open(parts[-1], _WRITE_FLAGS, 0o644, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PermissionError(f"{path}: is a symbolic link") from None
            raise type(exc)(exc.errno, f"{path}: {exc.strerror}") from None
        finally:
            os.close(parent)
        with os.fdopen(fd, "wb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise PermissionError(f"{path}: not a regular file")
            if self.owner is not None:
                os.fchown(handle.fileno(), *self.owner)
            handle.write(data)

    def collect(self, dest: Path, max_bytes: int) -> list[Path]:
        """Copy regular files to ``dest``, in name order, until ``max_bytes`` are copied.

        Symbolic links, devices, pipes and sockets are skipped, and so is any file that
        would take the total past ``max_bytes`` (logged as a warning).
        """
        dest.mkdir(parents=True, exist_ok=True)
        copied: list[Path] = []
        budget = [max_bytes]
        fd = self._open_root()
        try:
            self._collect_dir(fd, (), dest, copied, budget)
        finally:
            os.close(fd)
        return copied

    def _collect_dir(
        self, fd: int, rel: tuple[str, ...], dest: Path, copied: list[Path], budget: list[int]
    ) -> None:
        if len(rel) > _MAX_DEPTH:
            logger.warning("collect: %s is nested too deep; skipped", "/".join(rel))
            return
        with os.scandir(fd) as scan:
            entries = sorted(scan, key=lambda e: e.name)
        for entry in entries:
            shown = "/".join((*rel, entry.name))
            if entry.is_symlink():
                logger.info("collect: %s is a symbolic link; skipped", shown)
            elif entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(PermissionError, FileNotFoundError):
                    sub = _open_dir(entry.name, fd, shown)
                    try:
                        self._collect_dir(sub, (*rel, entry.name), dest, copied, budget)
                    finally:
                        os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                target = dest.joinpath(*rel, entry.name)
                if self._copy_file(entry.name, fd, shown, target, budget):
                    copied.append(target)

    @staticmethod
    def _copy_file(name: str, dir_fd: int, shown: str, target: Path, budget: list[int]) -> bool:
        try:
            fd = _open_file(name, dir_fd, shown)
        except OSError as exc:
            logger.info("collect: %s skipped: %s", shown, exc)
            return False
        with os.fdopen(fd, "rb") as source:
            size = os.fstat(source.fileno()).st_size
            if size > budget[0]:
                logger.warning(
                    "collect: %s (%d bytes) is past the output limit; skipped", shown, size
                )
                return False
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as sink:
                left = size
                while left > 0:
                    chunk = source.read(min(_CHUNK, left))
                    if not chunk:
                        break
                    sink.write(chunk)
                    left -= len(chunk)
            budget[0] -= size - left
        return True


def _open_file(name: str, dir_fd: int, shown: str) -> int:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PermissionError(f"{shown}: is a symbolic link") from None
        raise type(exc)(exc.errno, f"{shown}: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, f"{shown}: is a folder")
    raise PermissionError(errno.EACCES, f"{shown}: not a regular file")
