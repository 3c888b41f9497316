"""The docker backend's file helper, run inside a container (standard library only).

Run as the sandbox user by ``docker exec CONTAINER python3 -I -S -c <this file> OP ARGS``
(``ARGS`` is JSON); it answers on stdout with one JSON line, then the payload that line
announces. Every path is walked from ``/output`` one component at a time with
``O_NOFOLLOW``, so no symbolic link is ever followed; failures answer
``{"ok": false, "errno": N, "message": ...}``.

Operations:
    ``read``     a regular file's bytes (``parts``; at most ``max_bytes``, else EFBIG).
    ``write``    stdin's bytes to a file (``parts``), parent folders made, atomically.
    ``collect``  a tar stream on stdout of the output folder's regular files in name
                 order within ``max_bytes``, ``max_files`` and ``max_entries``; then one
                 JSON line on stderr: entries seen, and what was skipped, why.
"""

import contextlib
import errno
import json
import os
import stat
import sys
import tarfile

OUTPUT = "/output"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MAX_DEPTH = 64


def answer(header, payload=b""):
    out = sys.stdout.buffer
    out.write(json.dumps(header).encode() + b"\n")
    out.write(payload)
    out.flush()


def open_dir(name, fd):
    try:
        return os.open(name, _DIR, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PermissionError(
                errno.EACCES, f"{name}: not a folder (links are not followed)"
            ) from None
        raise


def walk_parent(parts, create):
    fd = os.open(OUTPUT, _DIR)
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
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
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


def op_read(args):
    parts, limit = args["parts"], int(args["max_bytes"])
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the output folder itself")
    parent = walk_parent(parts, create=False)
    try:
        fd = open_file(parts[-1], parent)
    finally:
        os.close(parent)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    answer({"ok": True, "size": len(data)}, data)


def op_write(args):
    parts = args["parts"]
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the output folder itself")
    data = sys.stdin.buffer.read()
    parent = walk_parent(parts, create=True)
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
        tmp = f".dsx-write-{os.getpid()}"
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
    answer({"ok": True, "size": len(data)})


class Collect:
    def __init__(self, args, tar):
        self.bytes_left = int(args["max_bytes"])
        self.files_left = int(args["max_files"])
        self.entries_left = int(args["max_entries"])
        self.tar = tar
        self.examples_left = int(args["examples"])
        self.skipped = {}
        self.examples = []
        self.entries = 0
        self.listing_cut = False

    def skip(self, shown, why):
        self.skipped[why] = self.skipped.get(why, 0) + 1
        if len(self.examples) < self.examples_left:
            self.examples.append(f"{shown}: {why}")

    def walk(self, fd, rel):
        if len(rel) > _MAX_DEPTH:
            self.skip("/".join(rel), "nested too deep")
            return
        entries = []
        with os.scandir(fd) as scan:
            for entry in scan:
                if self.entries_left <= 0:
                    self.skip("/".join([*rel, entry.name]), "past the listing limit")
                    self.listing_cut = True
                    break
                self.entries_left -= 1
                self.entries += 1
                entries.append(entry)
        entries.sort(key=lambda e: e.name)
        for entry in entries:
            shown = "/".join([*rel, entry.name])
            if entry.is_symlink():
                self.skip(shown, "symbolic link")
            elif entry.is_dir(follow_symlinks=False):
                try:
                    sub = open_dir(entry.name, fd)
                except (PermissionError, FileNotFoundError):
                    self.skip(shown, "unreadable folder")
                    continue
                try:
                    self.walk(sub, [*rel, entry.name])
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                if self.files_left <= 0:
                    self.skip(shown, "past the file-count limit")
                    continue
                self.add(entry.name, fd, shown)
            else:
                self.skip(shown, "not a regular file")

    def add(self, name, dir_fd, shown):
        try:
            fd = open_file(name, dir_fd)
        except OSError as exc:
            self.skip(shown, f"unreadable ({exc.strerror or exc})")
            return
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if info.st_size > self.bytes_left:
                self.skip(shown, "past the byte limit")
                return
            member = tarfile.TarInfo(shown)
            member.size, member.mtime, member.mode = info.st_size, int(info.st_mtime), 0o644
            self.tar.addfile(member, handle)
            self.bytes_left -= info.st_size
            self.files_left -= 1


def op_collect(args):
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        walk = Collect(args, tar)
        root = os.open(OUTPUT, _DIR)
        try:
            walk.walk(root, [])
        finally:
            os.close(root)
    sys.stdout.buffer.flush()
    summary = {"entries": walk.entries, "listing_cut": walk.listing_cut,
               "skipped": walk.skipped, "examples": walk.examples}  # fmt: skip
    sys.stderr.write(json.dumps(summary) + "\n")


OPS = {"read": op_read, "write": op_write, "collect": op_collect}


def main(argv):
    try:
        OPS[argv[1]](json.loads(argv[2]))
    except OSError as exc:
        code = exc.errno or errno.EIO
        answer({"ok": False, "errno": code, "message": str(exc.strerror or exc)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
