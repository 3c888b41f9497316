"""Process helpers for the local backend: kills that check a process's identity, a spawner.

Identities (pid, start time) are read by ``dataspace.sandbox._procfs``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from dataspace.sandbox._procfs import alive, pid_namespace, stat_fields

logger = logging.getLogger(__name__)


def kill(pid: int | None, started: int | None) -> bool:
    """SIGKILL the process identified by (pid, start time); whether it was still there."""
    if pid is None or not alive(pid, started):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return True


def all_pids() -> Iterator[int]:
    """Every pid visible in this process's /proc."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def namespace_members(namespace: int) -> list[tuple[int, int, int]]:
    """(pid, start time, session) of every process in the PID namespace ``namespace``."""
    members = []
    for pid in all_pids():
        if pid_namespace(pid) != namespace:
            continue
        fields = stat_fields(pid)
        if fields is not None:
            members.append((pid, int(fields[19]), int(fields[3])))
    return members


def find_by_cmdline(marker: bytes) -> list[int]:
    """Pids whose command line holds ``marker`` as one whole argument."""
    found = []
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


class Spawner:
    """Starts processes from one long-lived thread of this process.

    ``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child ends, not the
    process. Sandboxes are often created from worker threads that come and go, so their
    init processes are forked here, by a daemon thread that lives as long as the process.

    A child also inherits its forking thread's seccomp filter and ``no_new_privs``, so a
    spawner with ``setup`` (``Filter.install_on_thread``) starts every process under that
    filter while the process's other threads run without it; CPython then forks with its
    ``vfork`` fast path, where a ``preexec_fn`` would force a full fork of the controller.

    Several threads may serve the one queue: under a loaded host each start waits to be
    scheduled (the thread, then its ``vfork`` child until it execs), and one thread would
    make every concurrent attempt's commands wait in line for those waits.

    Args:
        setup: run first on each thread (again after a fork: the copy has no such thread);
            when it raises, :meth:`start` and :meth:`popen` raise ``OSError`` with it.
        name: the threads' name.
        threads: how many threads serve the queue.
    """

    def __init__(
        self,
        setup: Callable[[], None] | None = None,
        name: str = "sandbox-spawner",
        *,
        threads: int = 1,
    ) -> None:
        self._setup = setup
        self._name = name
        self._threads = max(1, threads)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[Future[subprocess.Popen[bytes]], list[str], dict]]
        self._queue = queue.SimpleQueue()
        self._owner_pid: int | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        """Start the thread unless this process has it.

        Raises:
            OSError: ``setup`` failed on it.
        """
        with self._lock:
            if self._owner_pid != os.getpid():  # first use, or first use after a fork
                self._queue = queue.SimpleQueue()
                self._error = None
                for _ in range(self._threads):
                    ready = threading.Event()
                    thread = threading.Thread(
                        target=self._serve, args=(self._queue, ready), name=self._name,
                        daemon=True,
                    )  # fmt: skip
                    thread.start()
                    ready.wait()
                    if self._error is not None:
                        break
                self._owner_pid = os.getpid()
            if self._error is not None:
                raise OSError(f"{self._name}: {self._error}")

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """``subprocess.Popen(argv, **kwargs)``, run on the spawner thread."""
        self.start()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._queue.put((future, argv, kwargs))
        return future.result()

    def _serve(self, requests: queue.SimpleQueue, ready: threading.Event) -> None:
        try:
            if self._setup is not None:
                self._setup()
        except Exception as exc:  # reported to every caller; the thread ends
            self._error = exc
            ready.set()
            return
        ready.set()
        while True:
            future, argv, kwargs = requests.get()
            try:
                future.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)
