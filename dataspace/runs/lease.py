"""One live invocation per run: a lease kept in the run's own store folder.

Two invocations of one run (the same command started twice, a second machine pointed at
the same store) would run every attempt twice and spend twice. Before anything is scheduled
the controller takes the run's lease; a second invocation is refused in one line naming the
holder (host, pid, start time). The holder renews the lease every third of its time to live
while it runs and marks it released when it ends; a lease whose holder stopped renewing for
longer than that time (``DATASPACE_LEASE_SECONDS``, default ``DEFAULT_LEASE_SECONDS``) is
taken over, and so is at once a lease held by a process of this host that no longer exists.

The mechanism needs nothing but the store's create-if-absent write (``put_bytes(...,
overwrite=False)``: an exclusive link on ``file://``, ``If-None-Match: *`` on S3), so it is
correct on any store that honours that, including S3-compatible services without
``If-Match`` on PutObject. Each holder writes its own generation::

    runs/<run_id>/lease/<generation>.json   {"holder": {...}, "renewed_at", "ttl_seconds",
                                             "released"}

The live lease is the highest generation. Taking it (fresh or over a stale holder) is
creating generation ``g + 1``: of two invocations racing for it exactly one create
succeeds. Renewing rewrites the holder's own generation, and only after checking that no
higher one exists; a holder that finds a higher generation has lost the lease (it was
taken over while it stalled) and stops scheduling. Generations are never reused (the
highest is never deleted), so a stalled holder always finds out. Times are the holders'
clocks: hosts sharing a store must keep their clocks within a fraction of the lease time.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dataspace.errors import AlreadyExistsError, ConfigError, NotFoundError, RunBusyError
from dataspace.runs.layout import RunLayout

logger = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 60.0
"""A lease not renewed for this long is taken over (the holder renews every third of it)."""
LEASE_ENV = "DATASPACE_LEASE_SECONDS"
_ATTEMPTS = 8  # bounded: each lost race means another invocation made progress


def lease_seconds(environ: Mapping[str, str] | None = None) -> float:
    """The lease time: ``$DATASPACE_LEASE_SECONDS`` or ``DEFAULT_LEASE_SECONDS``.

    >>> lease_seconds({}), lease_seconds({"DATASPACE_LEASE_SECONDS": "2.5"})
    (60.0, 2.5)

    Raises:
        ConfigError: the variable is not a number of seconds of at least 1.
    """
    env = os.environ if environ is None else environ
    raw = env.get(LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 1.0:
        raise ConfigError(f"{LEASE_ENV}={raw!r}: expected seconds >= 1, e.g. {LEASE_ENV}=60")
    return value


@dataclass(frozen=True, kw_only=True)
class LeaseHolder:
    """Who holds a lease."""

    host: str
    pid: int
    started_at: float
    token: str

    @classmethod
    def me(cls) -> LeaseHolder:
        """This process, now."""
        return cls(
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=time.time(),
            token=uuid.uuid4().hex,
        )

    def describe(self) -> str:
        """``host H pid P, started 2026-01-02 10:00:00 UTC``."""
        when = datetime.fromtimestamp(self.started_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"host {self.host} pid {self.pid}, started {when}"


class RunLease:
    """The lease of one run in one store (``acquire``, renewed by a thread, ``release``).

    Args:
        store: the run's store.
        layout: the run's layout.
        ttl: seconds after which an unrenewed lease is taken over.
    """

    def __init__(self, store: Any, layout: RunLayout, *, ttl: float = DEFAULT_LEASE_SECONDS):
        self.store = store
        self.layout = layout
        self.ttl = float(ttl)
        self.holder = LeaseHolder.me()
        self.generation: int | None = None
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- keys ---------------------------------------------------------------------------
    @property
    def _folder(self) -> str:
        return self.layout.key("lease/")

    def _key(self, generation: int) -> str:
        return f"{self._folder}{generation:012d}.json"

    def _generations(self) -> list[int]:
        out = []
        for key in self.store.list(self._folder):
            name = key.rsplit("/", 1)[-1]
            if name.endswith(".json") and name[:-5].isdigit():
                out.append(int(name[:-5]))
        return sorted(out)

    def _doc(self, *, released: bool = False) -> bytes:
        h = self.holder
        doc = {
            "schema_version": "1.0",
            "run_id": self.layout.run_id,
            "holder": {"host": h.host, "pid": h.pid, "started_at": h.started_at, "token": h.token},
            "renewed_at": time.time(),
            "ttl_seconds": self.ttl,
            "released": released,
        }
        return json.dumps(doc, indent=1).encode()

    # ---- taking and keeping it ------------------------------------------------------------
    def acquire(self) -> None:
        """Take the lease, or refuse with the live holder.

        Raises:
            RunBusyError: another invocation holds a live lease (the message names it).
        """
        for _ in range(_ATTEMPTS):
            gens = self._generations()
            nxt = 1
            if gens:
                current = self._read(gens[-1])
                if current is None:  # deleted between list and read: look again
                    continue
                problem = self._live(current)
                if problem:
                    raise RunBusyError(problem)
                nxt = gens[-1] + 1
            try:
                self.store.put_bytes(self._key(nxt), self._doc(), overwrite=False)
            except AlreadyExistsError:
                continue  # another invocation took this generation first: judge it
            self.generation = nxt
            for g in gens:  # older generations are dead; the highest is never removed
                if g < nxt:
                    self.store.delete(self._key(g))
            logger.info("run %s: lease generation %d taken", self.layout.run_id, nxt)
            return
        raise RunBusyError(
            f"run {self.layout.run_id!r}: other invocations keep taking its lease in "
            f"{self.store.url_for(self._folder)}; stop them or wait, then rerun"
        )

    def _read(self, generation: int) -> dict[str, Any] | None:
        try:
            doc = json.loads(self.store.get_bytes(self._key(generation)))
        except NotFoundError:
            return None
        except ValueError:
            return {}  # unreadable: treated as stale
        return doc if isinstance(doc, dict) else {}

    def _live(self, doc: Mapping[str, Any]) -> str | None:
        """The refusal for a live lease, or None when it may be taken over."""
        if doc.get("released"):
            return None
        raw = doc.get("holder")
        h = raw if isinstance(raw, dict) else {}
        try:
            holder = LeaseHolder(
                host=str(h["host"]),
                pid=int(h["pid"]),
                started_at=float(h["started_at"]),
                token=str(h.get("token", "")),
            )
            renewed = float(doc["renewed_at"])
            ttl = float(doc.get("ttl_seconds") or self.ttl)
        except (KeyError, TypeError, ValueError):
            return None
        age = time.time() - renewed
        if age > ttl:
            logger.warning(
                "run %s: taking over the lease of %s (not renewed for %.0f s)",
                self.layout.run_id,
                holder.describe(),
                age,
            )
            return None
        if holder.host == self.holder.host and not _pid_alive(holder.pid):
            logger.warning(
                "run %s: taking over the lease of %s (that process is gone)",
                self.layout.run_id,
                holder.describe(),
            )
            return None
        return (
            f"run {self.layout.run_id!r} is already running ({holder.describe()}, lease "
            f"renewed {max(0.0, age):.0f} s ago); a second invocation is refused; wait for it "
            f"to end, or if it is gone its lease is taken over {ttl:.0f} s after its last "
            f"renewal ({LEASE_ENV})"
        )

    def renew(self) -> bool:
        """Renew the lease; False (and ``lost`` set) when another invocation took it over."""
        if self.generation is None or self.lost.is_set():
            return False
        gens = self._generations()
        if gens and gens[-1] > self.generation:
            self._lose(gens[-1])
            return False
        self.store.put_bytes(self._key(self.generation), self._doc())
        return True

    def _lose(self, newer: int) -> None:
        doc = self._read(newer) or {}
        holder = doc.get("holder") or {}
        logger.error(
            "run %s: the lease was taken over by host %s pid %s (generation %d); no new "
            "attempts are scheduled by this invocation",
            self.layout.run_id,
            holder.get("host"),
            holder.get("pid"),
            newer,
        )
        self.lost.set()
        if self.generation is not None:
            self.store.delete(self._key(self.generation))

    def start_renewing(self) -> None:
        """Renew every third of the lease time in a daemon thread until ``release``."""

        def loop() -> None:
            while not self._stop.wait(self.ttl / 3):
                try:
                    if not self.renew():
                        return
                except Exception:  # a store hiccup: try again next period
                    logger.warning(
                        "renewing the lease of run %s failed", self.layout.run_id, exc_info=True
                    )

        self._thread = threading.Thread(target=loop, name="run-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Stop renewing and mark the lease released (the next invocation takes it at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.generation is None or self.lost.is_set():
            return
        gens = self._generations()
        if gens and gens[-1] > self.generation:
            return
        try:
            self.store.put_bytes(self._key(self.generation), self._doc(released=True))
        except Exception:
            logger.warning(
                "releasing the lease of run %s failed", self.layout.run_id, exc_info=True
            )

    def __enter__(self) -> RunLease:
        self.acquire()
        self.start_renewing()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["DEFAULT_LEASE_SECONDS", "LEASE_ENV", "LeaseHolder", "RunLease", "lease_seconds"]
