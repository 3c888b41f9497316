"""The init of one local sandbox: builds its namespaces and root, then reaps and waits.

Run as a script by :mod:`dataspace.sandbox.local` with ``python -S -I`` (standard library
only, no ``json``: it is the slowest import here). Arguments are ``key=value`` words
followed by filesystem operations, each a word and its fields::

    _init.py id=<sandbox id> ppid=<controller pid> wall=<seconds>
        root=<empty host folder> userns=<inner:outer-uid:outer-gid|->
        late_userns=<inner:outer-uid:outer-gid|-> hostname=<name>
        bind <src> <dst> | link <target> <dst> | tmpfs <dst> <options> | dev | proc
        | hidden <src> <dst> | loopback

Two processes result. The first stays in the controller's PID namespace, dies with the
controller (``PR_SET_PDEATHSIG``) and waits for the second, which is PID 1 of the new PID
namespace and dies with the first (``PR_SET_PDEATHSIG`` again). PID 1 mounts a private
tmpfs as the new root, binds the listed folders read-only, mounts /proc, a minimal /dev and
the tmpfs scratch folders, pivots into it, prints ``ready`` with its timings and its
deadline (``wall`` seconds from then: the sandbox's wall clock starts when it is ready, as
a pod's does) and then only reaps orphans; at the deadline it kills every other process of
the namespace.
When PID 1 dies, the kernel kills everything left in its PID namespace.

User namespaces. An unprivileged controller (``userns=``) unshares one together with the
other namespaces, so it owns them all, and writes its single mapping itself. A root
controller (``late_userns=``) builds the root as root; then PID 1 unshares a user namespace
of its own (owning nothing but itself, so no process in it can change the mounts) and the
first process, still in the host's user namespace, writes its mapping: the sandbox uid to
the given host ids. Commands join it last (``nsenter -U``), so each sandbox has its own user
namespace and with it its own user keyrings.

Protocol on stdout (which the controller reads until end of file): ``pid <host pid of PID
1>``, then ``ready <setup seconds> <workspace bind seconds> <host path hidden: 1 or 0>
<deadline, CLOCK_MONOTONIC seconds>`` or ``error <message>``.
"""

import contextlib
import ctypes
import os
import signal
import sys
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
SYS_MOUNT_SETATTR = 442
SYS_OPEN_TREE, SYS_MOVE_MOUNT, SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 428, 429, 430, 431, 432
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = 0o2000000
FSOPEN_CLOEXEC = 1
FSCONFIG_SET_STRING = 1
FSCONFIG_SET_FD = 5
FSCONFIG_CMD_CREATE = 6
FSMOUNT_CLOEXEC = 1
MOVE_MOUNT_F_EMPTY_PATH = 4
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)

# statvfs f_flag bits that the kernel locks on mounts inherited from a more privileged
# mount namespace; a remount must repeat them or it is refused.
LOCKED_FLAGS = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                       ctypes.c_char_p]  # fmt: skip


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src, dst, fstype, flags, data=None):
    enc = [None if v is None else os.fsencode(v) for v in (src, dst, fstype, data)]
    check(libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {dst}")


def make_readonly(path):
    """Make a bind mount and its submounts read-only, nosuid and nodev."""
    attr = MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, 0)
    result = libc.syscall(
        SYS_MOUNT_SETATTR, AT_FDCWD, os.fsencode(path), AT_RECURSIVE, ctypes.byref(attr),
        ctypes.sizeof(attr),
    )  # fmt: skip
    if result == 0:
        return
    if ctypes.get_errno() != 38:  # not ENOSYS
        check(result, f"mount_setattr {path}")
    locked = os.statvfs(path).f_flag & LOCKED_FLAGS
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | locked
    mount(None, path, None, flags)


def mkdirs(path):
    os.makedirs(path, mode=0o755, exist_ok=True)


def bind(src, dst, readonly):
    if os.path.isdir(src):
        mkdirs(dst)
    elif not os.path.lexists(dst):  # a placeholder in a read-only folder is used as it is
        mkdirs(os.path.dirname(dst))
        os.close(os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644))
    mount(src, dst, None, MS_BIND | MS_REC)
    if readonly:
        make_readonly(dst)


def syscall(number, *args, what):
    result = libc.syscall(number, *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def empty_tmpfs(fds):
    """A detached, read-only, empty tmpfs; its descriptor is appended to ``fds``."""
    fs = syscall(SYS_FSOPEN, b"tmpfs", FSOPEN_CLOEXEC, what="fsopen tmpfs")
    fds.append(fs)
    for key, value in ((b"size", b"4k"), (b"nr_inodes", b"2"), (b"mode", b"0755")):
        syscall(SYS_FSCONFIG, fs, FSCONFIG_SET_STRING, key, value, 0,
                what="tmpfs " + key.decode())  # fmt: skip
    syscall(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0, what="tmpfs create")
    attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
    mounted = syscall(SYS_FSMOUNT, fs, FSMOUNT_CLOEXEC, attrs, what="fsmount tmpfs")
    fds.append(mounted)
    return mounted


def hidden_bind(src, dst):
    """Show ``src`` read-only at ``dst`` with no trace of its host path in mountinfo.

    A bind mount's mountinfo line names the source folder's path in its filesystem. A
    read-only overlay whose layers are given as descriptors of detached mounts names only
    ``/``: a detached mount has no path above its root. The layers are a detached copy of
    the folder, on top, and, below it (an overlay without an upper layer needs two), the
    root of a detached empty tmpfs. That root is never in any tree, so nothing can remove
    it: the overlay reads every layer of its root folder, the only one merged from both,
    and an empty layer that was a removed folder makes that read come back empty.
    """
    fds = []
    try:
        fd = syscall(SYS_OPEN_TREE, AT_FDCWD, os.fsencode(src),
                     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE,
                     what=f"open_tree {src}")  # fmt: skip
        fds.append(fd)
        layers = [fd, empty_tmpfs(fds)]
        fs = syscall(SYS_FSOPEN, b"overlay", FSOPEN_CLOEXEC, what="fsopen overlay")
        fds.append(fs)
        for fd in layers:
            syscall(SYS_FSCONFIG, fs, FSCONFIG_SET_FD, b"lowerdir+", None, fd,
                    what="overlay lowerdir+")  # fmt: skip
        syscall(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0, what="overlay create")
        attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
        mounted = syscall(SYS_FSMOUNT, fs, FSMOUNT_CLOEXEC, attrs, what="fsmount overlay")
        fds.append(mounted)
        mkdirs(dst)
        syscall(SYS_MOVE_MOUNT, mounted, b"", AT_FDCWD, os.fsencode(dst),
                MOVE_MOUNT_F_EMPTY_PATH, what=f"move_mount {dst}")  # fmt: skip
    finally:
        for fd in fds:
            os.close(fd)


def setup_dev(root):
    dev = root + "/dev"
    mkdirs(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755")
    for name in ("null", "zero", "random", "urandom"):
        bind("/dev/" + name, f"{dev}/{name}", readonly=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{dev}/{name}")
    make_dev_readonly = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC
    mount(None, dev, None, make_dev_readonly)


def loopback_up():
    """Bring up ``lo`` of the new network namespace (no other interface exists)."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock, 0x8913, request))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(sock, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS, UP


def build_root(root, ops):
    """Mount the new root at ``root`` and apply ``ops``; return the workspace bind time."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    workspace_seconds = 0.0
    hidden = True
    for op in ops:
        kind = op[0]
        if kind == "hidden":
            started = time.monotonic()
            try:
                hidden_bind(op[1], root + op[2])
            except OSError:  # an older kernel: a plain bind mount shows the host path
                hidden = False
                bind(op[1], root + op[2], readonly=True)
            if op[2] == "/workspace":
                workspace_seconds = time.monotonic() - started
        elif kind == "bind":
            started = time.monotonic()
            bind(op[1], root + op[2], readonly=True)
            if op[2] == "/workspace":
                workspace_seconds = time.monotonic() - started
        elif kind == "link":
            mkdirs(os.path.dirname(root + op[2]))
            os.symlink(op[1], root + op[2])
        elif kind == "tmpfs":
            mkdirs(root + op[1])
            mount("tmpfs", root + op[1], "tmpfs", MS_NOSUID | MS_NODEV, op[2])
        elif kind == "dev":
            setup_dev(root)
        elif kind == "loopback":
            loopback_up()
        elif kind == "proc":
            mkdirs(root + "/proc")
            mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount(None, root, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(root)
    if SYS_PIVOT_ROOT is not None:
        check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
        check(libc.umount2(b".", MNT_DETACH), "umount old root")
    else:
        os.chroot(".")
    os.chdir("/")
    return workspace_seconds, hidden


def parse(argv):
    config, ops, index = {}, [], 0
    arity = {"bind": 2, "hidden": 2, "link": 2, "tmpfs": 2, "dev": 0, "proc": 0, "loopback": 0}
    while index < len(argv):
        word = argv[index]
        if word in arity:
            ops.append(tuple(argv[index : index + 1 + arity[word]]))
            index += 1 + arity[word]
        else:
            key, _, value = word.partition("=")
            config[key] = value
            index += 1
    return config, ops


def say(line):
    os.write(1, (line.replace("\n", " ") + "\n").encode())


def write_id_maps(inner, outer_uid, outer_gid, pid="self", proc_fd=None):
    """Map ``inner`` to the outer ids in the user namespace of ``pid``.

    Unprivileged, a process may only map its own ids in its own namespace, and must deny
    ``setgroups`` first; root maps another process's namespace (through ``proc_fd``, the
    host's /proc opened before PID 1 pivoted the shared mount namespace away from it) and
    keeps ``setgroups`` so that ``setpriv`` can clear the supplementary groups.
    """
    steps = [("uid_map", f"{inner} {outer_uid} 1"), ("gid_map", f"{inner} {outer_gid} 1")]
    if proc_fd is None:
        steps.insert(0, ("setgroups", "deny"))
    for name, text in steps:
        fd = os.open(f"{pid}/{name}" if proc_fd is not None else f"/proc/self/{name}",
                     os.O_WRONLY, dir_fd=proc_fd)  # fmt: skip
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)


def serve(deadline):
    """PID 1's life: reap orphans; past the deadline, kill everything else, repeatedly."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
            remaining = 1.0
        signal.sigtimedwait({signal.SIGCHLD}, remaining)


def main(argv):
    config, ops = parse(argv)
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
    if os.getppid() != int(config["ppid"]):
        return 3  # the controller is already gone
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    userns = config.get("userns", "-")
    if userns != "-":
        flags |= CLONE_NEWUSER
    try:
        check(libc.unshare(flags), "unshare")
        if userns != "-":
            write_id_maps(*userns.split(":"))
    except OSError as exc:
        say(f"error {exc}")
        return 1
    started = time.monotonic()
    lifeline, lifeline_end = os.pipe()  # end of file on it: the first process is gone
    # Late user namespace: PID 1 asks on one pipe, the first process answers on the other.
    ask_read, ask_write = os.pipe()
    answer_read, answer_write = os.pipe()
    late = config.get("late_userns", "-")
    proc_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY) if late != "-" else None
    child = os.fork()
    if child:
        os.close(lifeline)
        os.close(ask_write)
        os.close(answer_read)
        say(f"pid {child}")
        if late != "-" and os.read(ask_read, 1) == b"u":  # else PID 1 failed and says why
            try:
                write_id_maps(*late.split(":"), pid=child, proc_fd=proc_fd)
                os.write(answer_write, b"m")
            except OSError as exc:
                say(f"error mapping the user namespace: {exc}")
        if proc_fd is not None:
            os.close(proc_fd)  # it holds the host's old root mounts alive
        os.close(ask_read)
        os.close(answer_write)
        devnull = os.open("/dev/null", os.O_RDWR)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        _, status = os.waitpid(child, 0)
        return os.waitstatus_to_exitcode(status) & 0xFF
    os.close(lifeline_end)
    os.close(ask_read)
    os.close(answer_write)
    if proc_fd is not None:
        os.close(proc_fd)
    try:
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        os.set_blocking(lifeline, False)
        try:
            if os.read(lifeline, 1) == b"":
                os._exit(3)  # our parent died before the death signal was armed
        except BlockingIOError:
            pass
        os.close(lifeline)
        workspace_seconds, hidden = build_root(config["root"], ops)
        name = config.get("hostname", "sandbox").encode()
        check(libc.sethostname(name, len(name)), "sethostname")
        if late != "-":
            check(libc.unshare(CLONE_NEWUSER), "unshare user namespace")
            os.write(ask_write, b"u")
            if os.read(answer_read, 1) != b"m":
                raise OSError("the first process could not map the user namespace")
        os.close(ask_write)
        os.close(answer_read)
    except Exception as exc:
        say(f"error {exc}")
        os._exit(1)
    deadline = time.monotonic() + float(config["wall"])
    say(
        f"ready {time.monotonic() - started:.6f} {workspace_seconds:.6f} {int(hidden)} "
        f"{deadline:.6f}"
    )
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    serve(deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
