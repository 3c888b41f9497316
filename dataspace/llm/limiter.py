"""Concurrency caps per model endpoint, shared by every worker of a Ray cluster.

An endpoint is identified by its base URL and model id (``endpoint_key``). Each call to the
model holds one permit for the duration of one HTTP request (never while backing off), so
at most ``ModelSpec.max_concurrency`` requests to an endpoint are in flight at once.

When Ray is initialized in this process (a Ray worker, or a driver after ``ray.init``), the
permits live in a named Ray actor in the ``dataspace`` namespace (``get_if_exists=True``):
every worker of the cluster, and every run on it at the same time, shares one semaphore
per endpoint. The actor is not detached: the run controller creates the actors of its
endpoints (:func:`hold_limiters`) and ends them when the run ends, and they die with it
on any other exit, so nothing stays on the cluster. A worker whose actor ended (its
run finished while another run still uses the endpoint) makes a new one by the same
name. Permits are leases with an expiry, so a worker that dies while holding one
(kill -9, node lost) cannot leak it for good. Without Ray the cap is a process-local
semaphore.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from dataspace.errors import InfrastructureError
from dataspace.llm.models import DEFAULT_MAX_CONCURRENCY

logger = logging.getLogger(__name__)

RAY_NAMESPACE = "dataspace"


def endpoint_key(base_url: str | None, model_id: str) -> str:
    """A stable, short name for one endpoint.

    >>> endpoint_key("https://gw.example/v1/", "m")[:9]
    'llm-limit'
    >>> endpoint_key("https://gw.example/v1", "m") == endpoint_key("https://gw.example/v1/", "m")
    True
    """
    base = (base_url or "default").rstrip("/").lower()
    digest = hashlib.sha256(f"{base}|{model_id}".encode()).hexdigest()[:16]
    return f"llm-limit-{digest}"


@dataclass(frozen=True, kw_only=True)
class Lease:
    """One permit held."""

    id: str
    waited_seconds: float


class Limiter(Protocol):
    """A counting semaphore with leases."""

    def acquire(self, *, ttl: float) -> Lease:
        """Block until a permit is free; ``ttl`` bounds how long it may be held."""
        ...

    def release(self, lease: Lease) -> None:
        """Give a permit back (idempotent)."""
        ...


class LocalLimiter:
    """A process-local limiter (threads of one controller or worker)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, int(limit))
        self._cond = threading.Condition()
        self._held: dict[str, float] = {}

    def acquire(self, *, ttl: float) -> Lease:
        """Block until a permit is free."""
        t0 = time.monotonic()
        with self._cond:
            while True:
                now = time.monotonic()
                for k in [k for k, exp in self._held.items() if exp <= now]:
                    del self._held[k]
                if len(self._held) < self.limit:
                    lease = uuid.uuid4().hex
                    self._held[lease] = now + ttl
                    return Lease(id=lease, waited_seconds=time.monotonic() - t0)
                nearest = min(self._held.values()) - now
                self._cond.wait(timeout=max(0.01, min(nearest, 5.0)))

    def release(self, lease: Lease) -> None:
        """Return a permit."""
        with self._cond:
            if self._held.pop(lease.id, None) is not None:
                self._cond.notify()

    def in_use(self) -> int:
        """Permits currently held."""
        with self._cond:
            return len(self._held)


class _SemaphoreActor:
    """Body of the Ray actor: an asyncio semaphore whose permits expire."""

    def __init__(self, limit: int) -> None:
        import asyncio

        self.limit = max(1, int(limit))
        self.held: dict[str, float] = {}
        self.cond = asyncio.Condition()
        self.peak = 0

    def _expire(self) -> None:
        now = time.monotonic()
        for k in [k for k, exp in self.held.items() if exp <= now]:
            del self.held[k]

    async def acquire(self, ttl: float, timeout: float | None = None) -> str:
        """A lease id; ``""`` when ``timeout`` seconds passed without a free permit."""
        import asyncio

        end = None if timeout is None else time.monotonic() + timeout
        async with self.cond:
            while True:
                self._expire()
                if len(self.held) < self.limit:
                    lease = uuid.uuid4().hex
                    self.held[lease] = time.monotonic() + ttl
                    self.peak = max(self.peak, len(self.held))
                    return lease
                now = time.monotonic()
                if end is not None and now >= end:
                    return ""
                nearest = min(self.held.values()) - now
                if end is not None:
                    nearest = min(nearest, end - now)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.cond.wait(), timeout=max(0.01, min(nearest, 5)))

    async def release(self, lease: str) -> None:
        async with self.cond:
            if self.held.pop(lease, None) is not None:
                self.cond.notify_all()

    async def set_limit(self, limit: int) -> None:
        async with self.cond:
            self.limit = max(1, int(limit))
            self.cond.notify_all()

    async def stats(self) -> dict[str, int]:
        async with self.cond:
            self._expire()
            return {"limit": self.limit, "in_use": len(self.held), "peak": self.peak}


class RayLimiter:
    """A cluster-wide limiter backed by a named Ray actor (owned by its creator)."""

    def __init__(self, key: str, limit: int) -> None:
        self.key = key
        self.limit = limit
        self._actor = self._attach()

    def _attach(self) -> Any:
        """The endpoint's actor: the running one by name, else a new one owned by this process."""
        import ray

        cls: Any = ray.remote(
            num_cpus=0,
            max_concurrency=10_000,  # type: ignore[call-overload]
            max_restarts=0,
        )(_SemaphoreActor)
        try:
            actor = cls.options(name=self.key, namespace=RAY_NAMESPACE, get_if_exists=True).remote(
                self.limit
            )
            ray.get(actor.set_limit.remote(self.limit), timeout=60)
        except Exception as exc:
            raise InfrastructureError(
                f"concurrency limiter {self.key} unavailable: {exc}", code="model_limiter"
            ) from exc
        return actor

    def acquire(self, *, ttl: float) -> Lease:
        """Block until the cluster-wide semaphore grants a permit."""
        lease = self.try_acquire(ttl=ttl, timeout=None)
        assert lease is not None  # no timeout: granted or raised
        return lease

    def try_acquire(self, *, ttl: float, timeout: float | None) -> Lease | None:
        """A permit, or None when none was free within ``timeout`` seconds (None: wait)."""
        import ray
        from ray.exceptions import RayActorError

        t0 = time.monotonic()
        try:
            try:
                lease = ray.get(self._actor.acquire.remote(ttl, timeout))
            except RayActorError:  # its run ended: this endpoint gets a new actor
                self._actor = self._attach()
                lease = ray.get(self._actor.acquire.remote(ttl, timeout))
        except InfrastructureError:
            raise
        except Exception as exc:
            raise InfrastructureError(
                f"concurrency limiter {self.key} failed: {exc}", code="model_limiter"
            ) from exc
        if not lease:
            return None
        return Lease(id=lease, waited_seconds=time.monotonic() - t0)

    def close(self) -> None:
        """End the actor (its permits go with it); the next user makes a new one."""
        import ray

        try:
            ray.kill(self._actor, no_restart=True)
        except Exception:  # already gone, or the cluster is
            logger.debug("ending limiter %s failed", self.key, exc_info=True)

    def release(self, lease: Lease) -> None:
        """Return a permit (fire and forget; an expired lease is reclaimed anyway)."""
        try:
            self._actor.release.remote(lease.id)
        except Exception:
            logger.warning("could not release lease %s of %s", lease.id, self.key)

    def stats(self) -> dict[str, int]:
        """Limit, permits in use and the peak seen by the actor."""
        import ray

        return dict(ray.get(self._actor.stats.remote()))


_LOCAL: dict[str, LocalLimiter] = {}
_LOCAL_LOCK = threading.Lock()


def _ray_initialized() -> bool:
    ray: Any = sys.modules.get("ray")  # never import Ray just to ask
    try:
        return bool(ray is not None and ray.is_initialized())
    except Exception:
        return False


def get_limiter(key: str, limit: int, *, use_ray: bool | None = None) -> Limiter:
    """The limiter of endpoint ``key``: cluster-wide under Ray, process-local otherwise.

    Args:
        key: an ``endpoint_key``.
        limit: permits (the endpoint's ``max_concurrency``); the latest value wins.
        use_ray: force (True) or forbid (False) the Ray actor; default: when Ray is up.
    """
    if use_ray is None:
        use_ray = _ray_initialized()
    if use_ray:
        return RayLimiter(key, limit)
    with _LOCAL_LOCK:
        lim = _LOCAL.get(key)
        if lim is None:
            lim = _LOCAL[key] = LocalLimiter(limit)
        else:
            lim.limit = max(1, int(limit))
        return lim


def hold_limiters(endpoints: Iterable[tuple[str | None, Any]]) -> list[RayLimiter]:
    """Create the cluster-wide limiter of each (base URL, model) now, owned by this process.

    The run controller calls it once Ray is connected, so its workers find the actors by
    name and the actors end with the run (:meth:`RayLimiter.close`, or this process's exit).
    """
    out: dict[str, RayLimiter] = {}
    for base_url, model in endpoints:
        limit = getattr(model, "max_concurrency", None) or DEFAULT_MAX_CONCURRENCY
        key = endpoint_key(base_url, model.id)
        if key not in out:
            out[key] = RayLimiter(key, int(limit))
    return list(out.values())


def model_limiter(base_url: str | None, model: Any) -> Limiter:
    """The limiter of ``model`` at ``base_url``, with its ``max_concurrency`` permits."""
    limit = getattr(model, "max_concurrency", None) or DEFAULT_MAX_CONCURRENCY
    return get_limiter(endpoint_key(base_url, model.id), int(limit))


__all__ = [
    "Lease",
    "Limiter",
    "LocalLimiter",
    "RayLimiter",
    "endpoint_key",
    "get_limiter",
    "hold_limiters",
    "model_limiter",
]
