"""The in-pod helper of the ``kubernetes`` sandbox backend (standard library only).

The controller never relies on tools of the image beyond ``python3``: every operation on a
sandbox pod is one exec of ``python3 -c <this file, compressed> <op> <base64 JSON args>``
(after ``dataspace/sandbox/_outputfs.py``, the file operations the docker backend's
helper shares).
The helper answers on stdout with one frame, ``DSX1`` + a 4-byte big-endian header length
+ a JSON header + the payload bytes the header announces, so the controller can tell the
helper's own report from the command's output and can cap what crosses the API server.
Data sent to the pod (a file to write, a workspace tar) is announced by size in the
arguments and read as exactly that many bytes from stdin, so no end-of-input signal is
needed (the exec protocol v4 has none).

Operations:
    ``init``        PID 1 of the sandbox container: reaps orphans, exits on SIGTERM.
    ``stage-wait``  PID 1 of the staging init container: exits 0 once ``stage`` has put
                    the workspace in place and answered (a marker in the init container's
                    own ``/stage`` folder, never visible to the sandbox) or 1 after its
                    timeout.
    ``stage``       read a tar from stdin and unpack it into the workspace folder safely
                    (regular files and folders only, no absolute paths, no ``..``).
    ``run``         run a command with a timeout, a clean environment (nothing the kubelet
                    injects) and an output cap; on timeout kill everything it started;
                    report OOM kills.
    ``read``        read a regular file under the output folder, never following a link.
    ``image-file``  read a regular file of the image by absolute path, size-limited (the
                    Data Workbench Runtime manifest).
    ``write``       write a file under the output folder atomically, never following a link.
    ``collect``     tar the output folder's regular files (links skipped, size-limited).

``DS_SANDBOX_ROOT`` (default ``/``) moves the sandbox folders under another root; only
test doubles of the cluster set it.
"""

import base64
import contextlib
import errno
import io
import json
import os
import re
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import threading
import time

try:  # in the sandbox, shipped ahead of this program (sandbox_program)
    from _outputfs import DIR_FLAGS as _DIR
    from _outputfs import FILE_FLAGS as _FILE
    from _outputfs import read_file, write_file
except ModuleNotFoundError:  # imported on the host, as a module of the package
    from dataspace.sandbox._outputfs import DIR_FLAGS as _DIR
    from dataspace.sandbox._outputfs import FILE_FLAGS as _FILE
    from dataspace.sandbox._outputfs import read_file, write_file

ROOT = os.environ.get("DS_SANDBOX_ROOT", "/")
STAGED_MARKER = "/stage/staged"
MAGIC = b"DSX1"
_CHUNK = 1 << 16


def host(path):
    """The path of a sandbox path (``/output/x``) under ``ROOT``."""
    return path if ROOT == "/" else os.path.join(ROOT, path.lstrip("/"))


def emit(header, *payloads):
    """Write the one answer frame to stdout."""
    head = json.dumps(header).encode()
    out = sys.stdout.buffer
    out.write(MAGIC + struct.pack(">I", len(head)) + head)
    for payload in payloads:
        out.write(payload)
    out.flush()


def read_stdin(size):
    """Exactly ``size`` bytes of stdin (fewer only if the stream ends early)."""
    chunks, left = [], size
    while left > 0:
        chunk = sys.stdin.buffer.read(min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def fail(exc):
    """The header of a failed file operation."""
    return {"ok": False, "errno": exc.errno or errno.EIO, "message": str(exc.strerror or exc)}


# ---- PID 1 --------------------------------------------------------------------------------


def op_init(args):
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, lambda *_: os._exit(0))
    while True:
        time.sleep(1.0)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass


def op_stage_wait(args):
    signal.signal(signal.SIGTERM, lambda *_: os._exit(1))
    marker = host(STAGED_MARKER)
    end = time.monotonic() + float(args.get("timeout", 600))
    while time.monotonic() < end:
        if os.path.exists(marker):
            return 0
        time.sleep(0.02)
    sys.stderr.write("workspace was not staged in time\n")
    return 1


# ---- staging ------------------------------------------------------------------------------


class Bounded:
    """At most ``size`` bytes of a stream, as a file object."""

    def __init__(self, stream, size):
        self.stream, self.left = stream, size

    def read(self, n=-1):
        if self.left <= 0:
            return b""
        data = self.stream.read(self.left if n is None or n < 0 else min(n, self.left))
        self.left -= len(data)
        return data


def op_stage(args):
    dest = host(args.get("dest", "/workspace"))
    source = Bounded(sys.stdin.buffer, int(args["size"]))
    files = size = 0
    with tarfile.open(fileobj=source, mode="r|") as tar:
        for member in tar:
            name = member.name
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if name.startswith("/") or ".." in parts or not parts:
                continue
            target = os.path.join(dest, *parts)
            if member.isdir():
                os.makedirs(target, mode=0o755, exist_ok=True)
            elif member.isfile():
                os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                data = tar.extractfile(member)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
                with os.fdopen(fd, "wb") as sink:
                    while True:
                        chunk = data.read(_CHUNK)
                        if not chunk:
                            break
                        sink.write(chunk)
                files += 1
                size += member.size
    while source.read(_CHUNK):
        pass
    for base, dirs, _ in os.walk(dest):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(base, name), 0o555)
    # the answer goes out before the marker appears: once it does, ``stage-wait`` (PID 1 of
    # this container's PID namespace) exits and the kernel kills this exec with it
    marker = host(STAGED_MARKER)
    with open(marker + ".part", "w") as handle:
        handle.write(f"{files} {size}\n")
    emit({"ok": True, "files": files, "bytes": size})
    os.rename(marker + ".part", marker)
    return 0


# ---- commands -----------------------------------------------------------------------------


def oom_kills():
    """The OOM-kill counter of this container's memory cgroup (v2 or v1), or -1."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return -1


def descendants(root):
    """Pids started (directly or not) by ``root`` or in its session, from /proc."""
    parents, sessions = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        sessions[int(entry)] = int(fields[3])
    found = {pid for pid, sid in sessions.items() if sid == root}
    found.add(root)
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    found.discard(os.getpid())
    found.discard(1)
    return found


def kill_tree(pid):
    for _ in range(3):
        for target in descendants(pid):
            with contextlib.suppress(OSError):
                os.kill(target, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


class Capture(threading.Thread):
    """Reads one pipe to its end, keeping at most ``limit`` bytes."""

    def __init__(self, pipe, limit):
        super().__init__(daemon=True)
        self.pipe, self.limit, self.chunks, self.kept, self.dropped = pipe, limit, [], 0, 0

    def run(self):
        while True:
            chunk = os.read(self.pipe.fileno(), _CHUNK)
            if not chunk:
                return
            room = self.limit - self.kept
            if room > 0:
                self.chunks.append(chunk[:room])
                self.kept += min(room, len(chunk))
            self.dropped += max(0, len(chunk) - max(room, 0))

    def data(self):
        return b"".join(self.chunks)


SERVICE_LINK = re.compile(
    r"^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_[0-9]+_(TCP|UDP|SCTP)"
    r"(_PROTO|_PORT|_ADDR)?)$"
)
SERVICE_URL = re.compile(r"^(tcp|udp|sctp)://[0-9A-Fa-f.:\[\]]+:[0-9]+$")


def kubelet_injected(name, value):
    """Whether a variable is one the kubelet adds to every container, not the image's.

    The kubelet always adds the API server's service (``KUBERNETES_SERVICE_HOST`` and its
    siblings), even with ``enableServiceLinks: false``, and a variable family per service
    of the namespace where service links are on; none of it is the agent's business.

    >>> kubelet_injected("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    True
    >>> kubelet_injected("RELAY_PORT_8080_TCP_ADDR", "10.96.3.4")
    True
    >>> kubelet_injected("RELAY_PORT", "tcp://10.96.3.4:8080")
    True
    >>> kubelet_injected("DB_PORT", "5432"), kubelet_injected("LANG", "C.UTF-8")
    (False, False)
    """
    if name.startswith("KUBERNETES_") or SERVICE_LINK.match(name):
        return True
    return name.endswith("_PORT") and bool(SERVICE_URL.match(value))


def command_env(extra):
    """The container's environment (image and pod spec: never secrets) plus the sandbox's.

    What the kubelet injects (see ``kubelet_injected``) and the test doubles' own variables
    are left out; ``extra`` (the controller's) is applied last.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DS_SANDBOX_ROOT", "HOSTNAME") and not kubelet_injected(k, v)
    }
    env.update(extra)
    return env


def op_run(args):
    timeout = float(args["timeout"])
    limit = int(args.get("max_output", 8 << 20))
    nproc = args.get("nproc")

    def limit_processes():
        if nproc:
            import resource

            resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))

    before = oom_kills()
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            args["argv"],
            cwd=host(args.get("cwd", "/output")),
            env=command_env(args.get("env", {})),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limit_processes,
        )
    except OSError as exc:
        code = 127 if exc.errno == errno.ENOENT else 126
        message = f"{exc.strerror or exc}: {exc.filename or args['argv'][0]}\n".encode()
        emit(
            {
                "exit_code": code,
                "timed_out": False,
                "oom": False,
                "duration": time.monotonic() - started,
                "stdout": 0,
                "stderr": len(message),
                "dropped": [0, 0],
            },
            message,
        )
        return 0
    out, err = Capture(proc.stdout, limit), Capture(proc.stderr, limit)
    out.start()
    err.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_tree(proc.pid)
        proc.wait()
    duration = time.monotonic() - started
    out.join(0.5)
    err.join(0.5)
    code = proc.returncode
    # The OOM killer picks the largest process: under ``/bin/sh -c`` that is the shell's
    # child, and the shell exits 137. Any OOM kill in the container during the command
    # counts, as the local backend counts its cgroup's.
    oom = not timed_out and before >= 0 and oom_kills() > before
    stdout, stderr = out.data(), err.data()
    emit(
        {
            "exit_code": None if timed_out else (code if code >= 0 else 128 - code),
            "timed_out": timed_out,
            "oom": oom,
            "duration": duration,
            "stdout": len(stdout),
            "stderr": len(stderr),
            "dropped": [out.dropped, err.dropped],
        },
        stdout,
        stderr,
    )
    return 0


# ---- files under /output ------------------------------------------------------------------


def emit_bounded(data, limit):
    """Send ``data`` read with ``limit + 1`` bytes asked for, or EFBIG when it is larger."""
    if len(data) > limit:
        emit({"ok": False, "errno": errno.EFBIG, "message": f"larger than {limit} bytes"})
        return 0
    emit({"ok": True, "size": len(data)}, data)
    return 0


def op_read(args):
    try:
        data = read_file(host("/output"), args["parts"], int(args["max_bytes"]))
    except OSError as exc:
        emit(fail(exc))
        return 0
    emit({"ok": True, "size": len(data)}, data)
    return 0


def op_image_file(args):
    path, limit = args["path"], int(args["max_bytes"])
    try:
        # the image's own file, read before any command ran: links of the image are fine
        fd = os.open(host(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise PermissionError(errno.EACCES, "not a regular file")
            data = handle.read(limit + 1)
    except OSError as exc:
        emit(fail(exc))
        return 0
    return emit_bounded(data, limit)


def op_write(args):
    parts, size = args["parts"], int(args["size"])
    data = read_stdin(size)
    if len(data) != size:
        emit({"ok": False, "errno": errno.EIO, "message": "input cut short"})
        return 0
    try:
        write_file(host("/output"), parts, data)
    except OSError as exc:
        emit(fail(exc))
        return 0
    emit({"ok": True, "size": size})
    return 0


def op_collect(args):
    budget = [int(args["max_bytes"])]
    skipped = []
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as tar:
        root = os.open(host("/output"), _DIR)
        try:
            collect_dir(tar, root, "", budget, skipped, 0)
        finally:
            os.close(root)
    data = buf.getvalue()
    emit({"ok": True, "size": len(data), "skipped": skipped[:100]}, data)
    return 0


def collect_dir(tar, fd, rel, budget, skipped, depth):
    if depth > 64:
        skipped.append([rel, "nested too deep"])
        return
    with os.scandir(fd) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in entries:
        shown = f"{rel}{entry.name}"
        if entry.is_symlink():
            skipped.append([shown, "symbolic link"])
        elif entry.is_dir(follow_symlinks=False):
            try:
                sub = os.open(entry.name, _DIR, dir_fd=fd)
            except OSError:
                skipped.append([shown, "unreadable folder"])
                continue
            try:
                collect_dir(tar, sub, shown + "/", budget, skipped, depth + 1)
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False):
            try:
                file_fd = os.open(entry.name, _FILE, dir_fd=fd)
            except OSError as exc:
                skipped.append([shown, str(exc.strerror)])
                continue
            with os.fdopen(file_fd, "rb") as handle:
                info = os.fstat(file_fd)
                if not stat.S_ISREG(info.st_mode):
                    skipped.append([shown, "not a regular file"])
                    continue
                if info.st_size > budget[0]:
                    skipped.append([shown, "past the output limit"])
                    continue
                member = tarfile.TarInfo(shown)
                member.size, member.mtime, member.mode = info.st_size, int(info.st_mtime), 0o644
                tar.addfile(member, handle)
                budget[0] -= info.st_size
        else:
            skipped.append([shown, "not a regular file"])


OPS = {
    "init": op_init,
    "stage-wait": op_stage_wait,
    "stage": op_stage,
    "run": op_run,
    "read": op_read,
    "image-file": op_image_file,
    "write": op_write,
    "collect": op_collect,
}


def main(argv):
    op = argv[1]
    args = json.loads(base64.b64decode(argv[2])) if len(argv) > 2 else {}
    return OPS[op](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
