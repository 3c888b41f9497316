"""The local sandbox's seccomp filter: the usual container deny list as a classic BPF program.

Every command of a local sandbox runs under this filter. It is assembled here (about forty
instructions, no dependency) and installed with ``prctl`` on one thread of the controller
(``_procs.Spawner``), which starts every command's ``nsenter`` chain. A filter and
``no_new_privs`` belong to a thread, and a child inherits those of the thread that forked
it, so every process a command starts runs under the filter and none can remove it, while
the controller's other threads run without one. Installing it in each child instead (a
``preexec_fn``) would force CPython to fully fork the controller and run Python between fork
and exec: about 10 ms per command, against 1 ms for the ``vfork`` that a plain ``Popen``
uses. Assembling the program ourselves, rather than through libseccomp's Python bindings,
keeps the controller free of a C dependency that its virtual environment cannot install from
PyPI (Debian's ``python3-seccomp`` serves only Debian's own Python), and the program is
small enough to read in full (:func:`describe`).

Denied with ``EPERM`` (:data:`DENIED`): the kernel keyring (``add_key``, ``request_key``,
``keyctl``), ``bpf``, ``perf_event_open``, ``ptrace`` and its relatives
(``process_vm_readv``/``writev``, ``kcmp``, ``pidfd_getfd``), kernel modules, every mount
call (``mount``, ``umount2``, ``pivot_root`` and the new mount API), ``kexec``, ``reboot``,
swap, ``acct``, setting the clock, ``open_by_handle_at``, ``userfaultfd``, ``io_uring``,
quotas, ``fanotify_init``, host and domain names, ``syslog``; and ``clone`` or ``unshare``
asking for any new namespace (so ``unshare -Ur`` fails: no nested user namespace).
``clone3``, whose flags sit in memory a filter cannot read, fails with ``ENOSYS`` so the C
library falls back to ``clone``. Calls of another ABI (32-bit x86, x32) kill the process.
``setns`` stays allowed: ``nsenter`` needs it to enter the sandbox, and inside no process
holds a capability that would let it join anything.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import threading

from dataspace.sandbox.local import _procs

# (syscall, x86_64 number, aarch64 number); None where the architecture has no such call.
_TABLE: tuple[tuple[str, int | None, int | None], ...] = (
    ("add_key", 248, 217),
    ("request_key", 249, 218),
    ("keyctl", 250, 219),
    ("bpf", 321, 280),
    ("perf_event_open", 298, 241),
    ("ptrace", 101, 117),
    ("process_vm_readv", 310, 270),
    ("process_vm_writev", 311, 271),
    ("kcmp", 312, 272),
    ("pidfd_getfd", 438, 438),
    ("init_module", 175, 105),
    ("finit_module", 313, 273),
    ("delete_module", 176, 106),
    ("create_module", 174, None),
    ("query_module", 178, None),
    ("get_kernel_syms", 177, None),
    ("mount", 165, 40),
    ("umount2", 166, 39),
    ("pivot_root", 155, 41),
    ("open_tree", 428, 428),
    ("move_mount", 429, 429),
    ("fsopen", 430, 430),
    ("fsconfig", 431, 431),
    ("fsmount", 432, 432),
    ("fspick", 433, 433),
    ("mount_setattr", 442, 442),
    ("kexec_load", 246, 104),
    ("kexec_file_load", 320, 294),
    ("reboot", 169, 142),
    ("swapon", 167, 224),
    ("swapoff", 168, 225),
    ("acct", 163, 89),
    ("settimeofday", 164, 170),
    ("clock_settime", 227, 112),
    ("clock_adjtime", 305, 266),
    ("iopl", 172, None),
    ("ioperm", 173, None),
    ("lookup_dcookie", 212, 18),
    ("open_by_handle_at", 304, 265),
    ("name_to_handle_at", 303, 264),
    ("userfaultfd", 323, 282),
    ("quotactl", 179, 60),
    ("quotactl_fd", 443, 443),
    ("nfsservctl", 180, 42),
    ("uselib", 134, None),
    ("_sysctl", 156, None),
    ("vhangup", 153, 58),
    ("io_uring_setup", 425, 425),
    ("io_uring_enter", 426, 426),
    ("io_uring_register", 427, 427),
    ("fanotify_init", 300, 262),
    ("setdomainname", 171, 162),
    ("sethostname", 170, 161),
    ("syslog", 103, 116),
)
_FLAG_CHECKED = {"clone": (56, 220), "unshare": (272, 97)}
_CLONE3 = (435, 435)
_ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
_X32_BIT = 0x40000000

DENIED: tuple[str, ...] = tuple(name for name, _, _ in _TABLE)
"""Syscalls that always fail with ``EPERM``."""

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080  # unshare only: in clone's flags this bit is the exit signal
_CLONE_NS = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
    | CLONE_NEWNET
)  # fmt: skip
_UNSHARE_NS = _CLONE_NS | CLONE_NEWTIME

_LD_ABS_W = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def architecture() -> str | None:
    """This machine's architecture if the filter knows its syscall numbers, else ``None``."""
    machine = os.uname().machine
    return machine if machine in _ARCHES else None


def program(arch: str) -> list[tuple[int, int, int, int]]:
    """The filter for ``arch`` as (code, jt, jf, k) instructions.

    >>> prog = program("x86_64")
    >>> prog[0], prog[-3]
    ((32, 0, 0, 4), (6, 0, 0, 327681))
    """
    column, audit_arch = _ARCHES[arch]
    denied = [nr for _, *numbers in _TABLE if (nr := numbers[column]) is not None]
    clone, unshare = (_FLAG_CHECKED[name][column] for name in ("clone", "unshare"))
    # Body first with symbolic targets, then offsets once every position is known.
    Jump = str | int
    body: list[tuple[int, Jump, Jump, int]] = [
        (_LD_ABS_W, 0, 0, _OFF_ARCH),
        (_JEQ, 0, "kill", audit_arch),
        (_LD_ABS_W, 0, 0, _OFF_NR),
    ]
    if arch == "x86_64":
        body.append((_JGE, "kill", 0, _X32_BIT))
    for nr in denied:
        body.append((_JEQ, "eperm", 0, nr))
    body += [
        (_JEQ, "enosys", 0, _CLONE3[column]),
        (_JEQ, "clone", 0, clone),
        (_JEQ, "unshare", 0, unshare),
        (_RET, 0, 0, _RET_ALLOW),
    ]
    labels: dict[str, int] = {}
    for name, code in (("clone", _CLONE_NS), ("unshare", _UNSHARE_NS)):
        labels[name] = len(body)
        body += [(_LD_ABS_W, 0, 0, _OFF_ARG0), (_JSET, "eperm", 0, code), (_RET, 0, 0, _RET_ALLOW)]
    returns = (
        ("eperm", _RET_ERRNO | errno.EPERM),
        ("enosys", _RET_ERRNO | errno.ENOSYS),
        ("kill", _RET_KILL_PROCESS),
    )
    for name, action in returns:
        labels[name] = len(body)
        body.append((_RET, 0, 0, action))

    def offset(target: str | int, at: int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - at - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp filter: jump of {jump} from {at} does not fit")
        return jump

    return [(code, offset(jt, i), offset(jf, i), k) for i, (code, jt, jf, k) in enumerate(body)]


def describe(arch: str) -> str:
    """The filter as readable lines (what the documentation and the k8s profile list)."""
    column = _ARCHES[arch][0]
    numbers = ", ".join(f"{row[0]}({nr})" for row in _TABLE if (nr := row[1 + column]) is not None)
    return (
        f"arch {arch}: other ABIs killed; EPERM for {numbers}; EPERM for clone/unshare with "
        "namespace flags; ENOSYS for clone3; everything else allowed"
    )


def oci_profile() -> dict[str, object]:
    """The same deny list as an OCI/containerd seccomp profile (``k8s/seccomp/``).

    For pods with ``seccompProfile: Localhost`` (containerd, CRI-O) and for gVisor, whose
    ``runsc`` applies OCI profiles too. ``clone`` and ``unshare`` are refused when any
    namespace flag is set (one masked rule per flag: rules of one action are alternatives),
    ``clone3`` fails with ``ENOSYS`` as here.
    """
    rules: list[dict[str, object]] = [
        {"names": sorted(DENIED), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
    ]
    for name, mask in (("clone", _CLONE_NS), ("unshare", _UNSHARE_NS)):
        for bit in (1 << i for i in range(32)):
            if mask & bit:
                arg = {"index": 0, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ"}
                rules.append(
                    {"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM,
                     "args": [arg]}
                )  # fmt: skip
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"],
        "syscalls": rules,
    }


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


class Filter:
    """The filter, assembled once, ready to install on a thread (``_procs.Spawner``).

    Raises:
        OSError: this architecture has no syscall table here.
    """

    def __init__(self) -> None:
        arch = architecture()
        if arch is None:
            raise OSError(errno.ENOSYS, f"no seccomp syscall table for {os.uname().machine}")
        self.arch = arch
        instructions = program(arch)
        self.size = len(instructions)
        self._filters = (_SockFilter * self.size)(*[_SockFilter(*i) for i in instructions])
        self._prog = _SockFprog(self.size, self._filters)
        self._address = ctypes.addressof(self._prog)
        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl
        self._prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                                ctypes.c_ulong]  # fmt: skip
        self._prctl.restype = ctypes.c_int

    def bytes(self) -> bytes:
        """The program as the kernel reads it (``struct sock_filter`` array)."""
        return b"".join(struct.pack("=HBBI", *i) for i in program(self.arch))

    def install_on_thread(self) -> None:
        """Set ``no_new_privs`` and install the filter on the calling thread, for good.

        Raises:
            OSError: ``prctl`` failed, or the kernel does not report the filter after it.
        """
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self._address, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
        if _thread_seccomp_mode() != SECCOMP_MODE_FILTER:
            raise OSError(errno.EPERM, "the kernel reports no seccomp filter on the thread")


def _thread_seccomp_mode() -> int | None:
    """The calling thread's seccomp mode as ``/proc/thread-self/status`` gives it."""
    try:
        with open("/proc/thread-self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Seccomp:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


SPAWNER_THREADS = 8
"""Threads that start sandbox commands: enough that hundreds of attempts' commands do not
wait in line behind one thread's scheduling delays, few enough to cost nothing."""

_SHARED: tuple[Filter, _procs.Spawner] | None = None
_SHARED_LOCK = threading.Lock()


def shared() -> tuple[Filter, _procs.Spawner]:
    """This process's one filter and the spawner whose threads run under it.

    Every backend shares them (the runner makes a backend per attempt).

    Raises:
        OSError: this architecture has no syscall table here.
    """
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            seccomp = Filter()
            spawner = _procs.Spawner(
                setup=seccomp.install_on_thread,
                name="sandbox-seccomp-spawner",
                threads=SPAWNER_THREADS,
            )
            _SHARED = (seccomp, spawner)
        return _SHARED
