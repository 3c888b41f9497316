"""Concurrency limits of pod creation and deletion, per process or across a Ray cluster.

Two independent pools: ``create`` slots are held from the pod's creation until it is ready
(or has failed), so a pod stuck in Pending holds a creation slot but never a slot a ready
sandbox could use; ``delete`` slots are held while a deletion is in flight. Ready sandboxes
hold no slot at all: how many run at once is the run's ``concurrency``.

Inside a Ray job every attempt runs in its own worker process, so a per-process semaphore
would limit nothing; there the slots live in one named Ray actor (leases with an expiry,
so a worker that dies holding a slot cannot leak it for ever). Elsewhere a process-wide
semaphore is enough.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from dataspace.errors import SandboxError

logger = logging.getLogger(__name__)

ACTOR_NAME = "dataspace-k8s-slots"
ACTOR_NAMESPACE = "dataspace"


class SlotTimeoutError(SandboxError):
    """No slot came free in time."""


class Slots(Protocol):
    """Bounded pools of slots by kind (``create``, ``delete``)."""

    def acquire(self, kind: str, limit: int, *, timeout: float, ttl: float) -> str:
        """Take a slot of ``kind`` (at most ``limit`` held); returns a lease id."""
        ...

    def release(self, kind: str, lease: str) -> None:
        """Give a slot back (unknown or expired leases are ignored)."""
        ...


class ThreadSlots:
    """Process-wide pools (threads of one controller process)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: dict[str, dict[str, float]] = {}
        self.peak: dict[str, int] = {}

    def acquire(self, kind: str, limit: int, *, timeout: float, ttl: float) -> str:
        """Block until a slot is free; leases past ``ttl`` seconds are reclaimed."""
        end = time.monotonic() + timeout
        lease = uuid.uuid4().hex
        with self._cond:
            while True:
                held = self._held.setdefault(kind, {})
                now = time.monotonic()
                for old in [k for k, exp in held.items() if exp < now]:
                    logger.warning("%s slot lease %s expired; reclaimed", kind, old)
                    del held[old]
                if len(held) < limit:
                    held[lease] = now + ttl
                    self.peak[kind] = max(self.peak.get(kind, 0), len(held))
                    return lease
                left = end - now
                if left <= 0:
                    raise SlotTimeoutError(
                        f"no {kind} slot free within {timeout:.0f}s ({limit} in use)"
                    )
                self._cond.wait(min(left, 1.0))

    def release(self, kind: str, lease: str) -> None:
        """Return a slot and wake a waiter."""
        with self._cond:
            self._held.get(kind, {}).pop(lease, None)
            self._cond.notify_all()

    def held(self, kind: str) -> int:
        """Slots of ``kind`` held now."""
        with self._cond:
            return len(self._held.get(kind, {}))


class _SlotActor:
    """The state of cluster-wide pools (runs as a named Ray actor)."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, float]] = {}
        self.peak: dict[str, int] = {}

    def try_acquire(self, kind: str, limit: int, lease: str, ttl: float) -> bool:
        held = self.held.setdefault(kind, {})
        now = time.time()
        for old in [k for k, exp in held.items() if exp < now]:
            del held[old]
        if len(held) >= limit:
            return False
        held[lease] = now + ttl
        self.peak[kind] = max(self.peak.get(kind, 0), len(held))
        return True

    def release(self, kind: str, lease: str) -> None:
        self.held.get(kind, {}).pop(lease, None)

    def stats(self) -> dict[str, Any]:
        return {"held": {k: len(v) for k, v in self.held.items()}, "peak": dict(self.peak)}


class RaySlots:
    """Cluster-wide pools kept by one detached, named Ray actor (created on first use)."""

    def __init__(self, name: str = ACTOR_NAME) -> None:
        import ray

        self._ray = ray
        actor_cls = ray.remote(num_cpus=0, max_restarts=-1)(_SlotActor)
        self.actor: Any = actor_cls.options(
            name=name, namespace=ACTOR_NAMESPACE, lifetime="detached", get_if_exists=True
        ).remote()

    def acquire(self, kind: str, limit: int, *, timeout: float, ttl: float) -> str:
        """Poll the actor with jittered backoff until a slot is granted."""
        lease = uuid.uuid4().hex
        end = time.monotonic() + timeout
        delay = 0.05
        while True:
            if self._ray.get(self.actor.try_acquire.remote(kind, limit, lease, ttl)):
                return lease
            if time.monotonic() >= end:
                raise SlotTimeoutError(
                    f"no {kind} slot free within {timeout:.0f}s ({limit} in use)"
                )
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)

    def release(self, kind: str, lease: str) -> None:
        """Return a slot (fire and forget)."""
        self.actor.release.remote(kind, lease)

    def stats(self) -> dict[str, Any]:
        """Held and peak slots by kind."""
        return dict(self._ray.get(self.actor.stats.remote()))


_PROCESS_SLOTS = ThreadSlots()
_RAY_SLOTS: dict[str, RaySlots] = {}


def default_slots(mode: str = "auto") -> Slots:
    """``thread`` (this process), ``ray`` (cluster-wide) or ``auto``: ray inside a Ray worker."""
    if mode == "thread":
        return _PROCESS_SLOTS
    ray = sys.modules.get("ray")
    in_ray = ray is not None and ray.is_initialized()
    if mode == "ray" or (mode == "auto" and in_ray):
        try:
            if ACTOR_NAME not in _RAY_SLOTS:
                _RAY_SLOTS[ACTOR_NAME] = RaySlots()
            return _RAY_SLOTS[ACTOR_NAME]
        except Exception as exc:
            if mode == "ray":
                raise SandboxError(f"cluster-wide pod slots need Ray: {exc}") from exc
            logger.warning("cluster-wide pod slots unavailable (%s); using per-process ones", exc)
    return _PROCESS_SLOTS


@contextmanager
def slot(slots: Slots, kind: str, limit: int, *, timeout: float, ttl: float) -> Iterator[None]:
    """Hold one slot of ``kind`` for the ``with`` block."""
    lease = slots.acquire(kind, limit, timeout=timeout, ttl=ttl)
    try:
        yield
    finally:
        slots.release(kind, lease)


__all__ = ["RaySlots", "SlotTimeoutError", "Slots", "ThreadSlots", "default_slots", "slot"]
