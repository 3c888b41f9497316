"""The docker backend's file helper, run inside a container (standard library only).

Run as the sandbox user by ``docker exec CONTAINER python3 -I -S -c <program> OP ARGS``
(``ARGS`` is JSON; the program is this file after ``dataspace/sandbox/_outputfs.py``, the
file operations the kubernetes backend's helper shares); it answers on stdout with one
JSON line, then the payload that line announces. Every path is walked from ``/output``
one component at a time with ``O_NOFOLLOW``, so no symbolic link is ever followed;
failures answer ``{"ok": false, "errno": N, "message": ...}``.

Operations:
    ``read``     a regular file's bytes (``parts``; at most ``max_bytes``, else EFBIG).
    ``write``    stdin's bytes to a file (``parts``), parent folders made, atomically.
    ``collect``  a tar stream on stdout of the output folder's regular files in name
                 order within ``max_bytes``, ``max_files`` and ``max_entries``; then one
                 JSON line on stderr: entries seen, and what was skipped, why.
"""

import errno
import json
import os
import sys
import tarfile

try:  # in the sandbox, shipped ahead of this program (sandbox_program)
    from _outputfs import DIR_FLAGS, open_dir, open_file, read_file, write_file
except ModuleNotFoundError:  # imported on the host, as a module of the package
    from dataspace.sandbox._outputfs import DIR_FLAGS, open_dir, open_file, read_file, write_file

OUTPUT = "/output"
_MAX_DEPTH = 64


def answer(header, payload=b""):
    out = sys.stdout.buffer
    out.write(json.dumps(header).encode() + b"\n")
    out.write(payload)
    out.flush()


def op_read(args):
    data = read_file(OUTPUT, args["parts"], int(args["max_bytes"]))
    answer({"ok": True, "size": len(data)}, data)


def op_write(args):
    if not args["parts"]:
        raise IsADirectoryError(errno.EISDIR, "the output folder itself")
    data = sys.stdin.buffer.read()
    write_file(OUTPUT, args["parts"], data)
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
        root = os.open(OUTPUT, DIR_FLAGS)
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
