"""Files under a sandbox's output folder, never following a link (standard library only).

The one source of the file operations that run inside a sandbox: the docker backend's
helper (``docker/_inside.py``) and the kubernetes backend's (``kubernetes/_helper.py``)
import it as ``_outputfs``, and :func:`sandbox_program` ships it with them. Every path is
walked from the output folder one component at a time with ``O_NOFOLLOW``, so no symbolic
link is followed; failures raise ``OSError`` with the errno and a message naming the
component, which each helper reports in its own framing.
"""

import contextlib
import errno
import os
import stat

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_dir(name, fd):
    """An fd of the folder ``name`` in ``fd``; a link or a non-folder is EACCES."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PermissionError(
                errno.EACCES, f"{name}: not a folder (links are not followed)"
            ) from None
        raise


def walk_parent(root, parts, create):
    """An fd of the folder holding ``parts[-1]`` under ``root`` (made with ``create``)."""
    fd = os.open(root, DIR_FLAGS)
    try:
        for name in parts[:-1]:
            try:
                sub = open_dir(name, fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                sub = open_dir(name, fd)
            os.close(fd)
            fd = sub
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_file(name, dir_fd):
    """An fd of the regular file ``name`` in ``dir_fd``; a link or anything else refused."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PermissionError(errno.EACCES, f"{name}: is a symbolic link") from None
        raise
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, f"{name}: is a folder")
    raise PermissionError(errno.EACCES, f"{name}: not a regular file")


def read_file(root, parts, limit):
    """The bytes of the regular file ``parts`` under ``root``; more than ``limit``: EFBIG."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the output folder itself")
    parent = walk_parent(root, parts, create=False)
    try:
        fd = open_file(parts[-1], parent)
    finally:
        os.close(parent)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def write_file(root, parts, data):
    """Write ``data`` to ``parts`` under ``root`` atomically, parent folders made."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the output folder itself")
    parent = walk_parent(root, parts, create=True)
    try:
        try:
            info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISLNK(info.st_mode):
            raise PermissionError(errno.EACCES, f"{parts[-1]}: is a symbolic link")
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{parts[-1]}: is a folder")
        if info is not None and not stat.S_ISREG(info.st_mode):
            raise PermissionError(errno.EACCES, f"{parts[-1]}: not a regular file")
        tmp = f".ds-write-{os.getpid()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o644, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.rename(tmp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
    finally:
        os.close(parent)


def sandbox_program(helper):
    """The source a sandbox runs for ``helper`` (a path).

    This module first, importable there as ``_outputfs``, then the helper's own source.
    """
    with open(__file__, encoding="utf-8") as fh:
        shared = fh.read()
    with open(helper, encoding="utf-8") as fh:
        own = fh.read()
    boot = (
        "import sys as _sys, types as _types\n"
        "_outputfs = _types.ModuleType('_outputfs')\n"
        f"exec(compile({shared!r}, '_outputfs.py', 'exec'), _outputfs.__dict__)\n"
        "_sys.modules['_outputfs'] = _outputfs\n"
        "del _sys, _types, _outputfs\n"
    )
    return boot + own
