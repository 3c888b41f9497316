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
MAX_COLLECT_FILES = 10_000
"""At most this many files of an output folder are collected."""
MAX_COLLECT_ENTRIES = 50_000
"""At most this many folder entries are looked at by one collect."""
_EXAMPLES = 20


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

    def collect(
        self,
        dest: Path,
        max_bytes: int,
        max_files: int = MAX_COLLECT_FILES,
        max_entries: int = MAX_COLLECT_ENTRIES,
    ) -> CollectReport:
        """Copy regular files to ``dest`` in name order, within three bounds.

        At most ``max_bytes`` bytes and ``max_files`` files are copied and at most
        ``max_entries`` folder entries are looked at (so a folder of millions of files costs
        a bounded time). Symbolic links, devices, pipes and sockets are skipped, and so is
        every file past a bound; the report counts each reason and names the first few.
        """
        dest.mkdir(parents=True, exist_ok=True)
        report = CollectReport(max_bytes=max_bytes, max_files=max_files, max_entries=max_entries)
        fd = self._open_root()
        try:
            self._collect_dir(fd, (), dest, report)
        finally:
            os.close(fd)
        if report.skipped:
            logger.warning("collect: %s", report.summary())
        return report

    def _collect_dir(
        self, fd: int, rel: tuple[str, ...], dest: Path, report: CollectReport
    ) -> None:
        if len(rel) > _MAX_DEPTH:
            report.skip("/".join(rel), "nested too deep")
            return
        entries = []
        with os.scandir(fd) as scan:
            for entry in scan:
                if report.entries >= report.max_entries:
                    report.skip("/".join((*rel, entry.name)), "past the listing limit")
                    report.listing_cut = True
                    break
                report.entries += 1
                entries.append(entry)
        entries.sort(key=lambda e: e.name)
        for entry in entries:
            shown = "/".join((*rel, entry.name))
            if entry.is_symlink():
                report.skip(shown, "symbolic link")
            elif entry.is_dir(follow_symlinks=False):
                try:
                    sub = _open_dir(entry.name, fd, shown)
                except (PermissionError, FileNotFoundError):
                    report.skip(shown, "unreadable folder")
                    continue
                try:
                    self._collect_dir(sub, (*rel, entry.name), dest, report)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                if len(report.copied) >= report.max_files:
                    report.skip(shown, "past the file-count limit")
                    continue
                target = dest.joinpath(*rel, entry.name)
                why = self._copy_file(entry.name, fd, shown, target, report)
                if why is None:
                    report.copied.append(target)
                else:
                    report.skip(shown, why)
            else:
                report.skip(shown, "not a regular file")

    @staticmethod
    def _copy_file(
        name: str, dir_fd: int, shown: str, target: Path, report: CollectReport
    ) -> str | None:
        try:
            fd = _open_file(name, dir_fd, shown)
        except OSError as exc:
            return f"unreadable ({exc.strerror or exc})"
        with os.fdopen(fd, "rb") as source:
            size = os.fstat(source.fileno()).st_size
            if report.bytes + size > report.max_bytes:
                return "past the byte limit"
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as sink:
                left = size
                while left > 0:
                    chunk = source.read(min(_CHUNK, left))
                    if not chunk:
                        break
                    sink.write(chunk)
                    left -= len(chunk)
            report.bytes += size - left
        return None


@dataclass(kw_only=True)
class CollectReport:
    """What one collect copied and what it skipped, and why."""

    max_bytes: int
    max_files: int
    max_entries: int
    copied: list[Path] = field(default_factory=list)
    bytes: int = 0
    entries: int = 0
    listing_cut: bool = False
    skipped: dict[str, int] = field(default_factory=dict)
    """How many entries were skipped, by reason."""
    examples: list[str] = field(default_factory=list)
    """The first skipped entries, as ``path: reason``."""

    def skip(self, shown: str, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1
        if len(self.examples) < _EXAMPLES:
            self.examples.append(f"{shown}: {why}")

    def summary(self) -> str:
        """One line: what was copied, and each reason for a skip with its count."""
        text = f"{len(self.copied)} files ({self.bytes} bytes) copied"
        if self.skipped:
            reasons = ", ".join(f"{count} {why}" for why, count in sorted(self.skipped.items()))
            text += f"; skipped: {reasons}"
            if self.listing_cut:
                text += f" (listing stopped after {self.max_entries} entries)"
        return text

    def to_dict(self) -> dict[str, object]:
        """The attempt record's view of the report."""
        return {
            "files": len(self.copied),
            "bytes": self.bytes,
            "entries_seen": self.entries,
            "limits": {
                "bytes": self.max_bytes,
                "files": self.max_files,
                "entries": self.max_entries,
            },
            "skipped": dict(self.skipped),
            "skipped_examples": list(self.examples),
            "listing_cut": self.listing_cut,
        }


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
