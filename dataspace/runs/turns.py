"""Turns: ``concurrency`` agents run at once while the next attempts prepare their sandboxes.

Starting a sandbox takes seconds (a pod is scheduled, its containers start, its workspace
is staged) and so does ending one (outputs collected, the attempt uploaded, the pod
deleted). An attempt that did both while holding one of the run's ``concurrency`` places
would leave that place without an agent for the start-up and the teardown of every
attempt: with a 4 s pod start that is 1.08x the ideal makespan of the paper's benchmark at
64-way (``scripts/simulate_cluster.py``), whatever the order.

So the controller keeps ``concurrency + prestart`` attempts in flight (:func:`in_flight`).
Each creates its sandbox at once, then waits for a *turn*, one of ``concurrency`` permits
of a cluster-wide semaphore (:class:`Turns`), to run its agent; the sandbox's wall clock
starts when the turn comes. The turn is handed on as soon as the agent ends: collection,
scoring, the upload and the sandbox's deletion go on beside the next attempt's agent. How
many agents (and so model calls) run at once is still ``concurrency``; the cluster holds
up to ``prestart`` more sandboxes, idle, ready for the next turns.

A sandbox that waits longer than :data:`TURN_WAIT_LIMIT` for its turn (every agent of the
run is in a long attempt) is closed and made again once the turn comes, so no sandbox
waits near its own deadline (a pod's ``activeDeadlineSeconds`` counts from its start).
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

#: turns per sandbox prepared ahead that ``scripts/simulate_cluster.py`` uses (and
#: ``docs/cluster.md`` suggests) for a cluster; the default is none (the paper's loop)
TURNS_PER_PRESTART = 8
#: seconds a ready sandbox may wait for its turn before it is closed and made again later
TURN_WAIT_LIMIT = 60.0
#: seconds past the wall clock after which a turn held by a lost worker is reclaimed
TURN_LEASE_GRACE = 900.0


def prestart_for(concurrency: int, prestart: int | None) -> int:
    """Sandboxes prepared ahead of a free turn: ``prestart``, by default none.

    Preparing sandboxes ahead is opt-in: the default is the paper's loop, each attempt
    making its sandbox in its own place (:func:`suggested_prestart` is the cluster figure).

    >>> prestart_for(64, None), prestart_for(2, None), prestart_for(64, 0), prestart_for(4, 3)
    (0, 0, 0, 3)
    """
    return prestart if prestart is not None else 0


def suggested_prestart(concurrency: int) -> int:
    """One sandbox prepared ahead per 8 turns: what the simulator measures on a cluster.

    >>> suggested_prestart(64), suggested_prestart(2)
    (8, 1)
    """
    return math.ceil(concurrency / TURNS_PER_PRESTART)


def in_flight(concurrency: int, prestart: int | None) -> int:
    """Attempts the controller keeps in flight: the turns plus the sandboxes prepared ahead.

    >>> in_flight(64, 8), in_flight(2, None)
    (72, 2)
    """
    return concurrency + prestart_for(concurrency, prestart)


def attempt_cpus(cluster_cpus: float, in_flight: int) -> float:
    """The Ray CPUs each attempt asks for: the cluster's CPUs shared by the attempts in flight.

    An attempt mostly waits on its model (the sandbox's commands are short and its pod, on
    a cluster, is not the worker's), so reserving a whole CPU for it would make Ray, not
    the run's ``concurrency``, the limit: a 2-CPU node would run 2 attempts at a time.
    Each attempt asks for an equal share of the cluster's CPUs instead, at most one, so
    every attempt the controller keeps in flight can run at once and Ray still spreads
    them over the nodes by their CPUs. A local Ray that ``dataspace run`` starts has one
    CPU per attempt in flight, so there each still asks for one. The share is rounded
    down to Ray's resource precision (1/10,000).

    >>> attempt_cpus(2, 8), attempt_cpus(16, 16), attempt_cpus(64, 16), attempt_cpus(2, 3)
    (0.25, 1.0, 1.0, 0.6666)
    >>> attempt_cpus(2, 100_000), attempt_cpus(0, 8)
    (0.0001, 1.0)
    """
    if cluster_cpus <= 0 or in_flight <= 0:  # no CPU yet (nodes to join): as before
        return 1.0
    share = math.floor(cluster_cpus / in_flight * 10_000) / 10_000
    return min(1.0, max(share, 0.0001))


def describe_turns(concurrency: int, prestart: int | None) -> str:
    """One line for preflight: agents at once and sandboxes prepared ahead.

    >>> describe_turns(64, None)
    '64 agents at once; no sandbox prepared ahead (spec key prestart, e.g. 8 on a cluster)'
    >>> describe_turns(2, 1)
    '2 agents at once; 1 sandbox prepared ahead (prestart)'
    """
    ahead = prestart_for(concurrency, prestart)
    head = f"{concurrency} agents at once; "
    if not ahead:
        hint = suggested_prestart(concurrency)
        return head + f"no sandbox prepared ahead (spec key prestart, e.g. {hint} on a cluster)"
    return head + f"{ahead} sandbox{'es' if ahead > 1 else ''} prepared ahead (prestart)"


def turns_key(run_id: str) -> str:
    """The name of a run's turn semaphore on the Ray cluster.

    >>> turns_key("bench").startswith("run-turns-"), len(turns_key("bench"))
    (True, 26)
    """
    return "run-turns-" + hashlib.sha256(run_id.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One turn held (give it back with :meth:`Turns.release`)."""

    lease: Any
    waited_seconds: float


class Turns:
    """A run's turns: a cluster-wide semaphore of ``concurrency`` permits (picklable).

    The controller makes it (:meth:`hold`) once Ray is connected and ends it with the run;
    attempts, in Ray workers, take and give back turns through the same named actor.
    """

    def __init__(self, limiter: Any, *, ttl: float) -> None:
        self._limiter = limiter
        self.ttl = ttl

    @classmethod
    def hold(cls, run_id: str, concurrency: int, *, wall_seconds: float) -> Turns:
        """The run's turns, owned by this process (the controller)."""
        from dataspace.llm.limiter import RayLimiter

        return cls(RayLimiter(turns_key(run_id), concurrency), ttl=wall_seconds + TURN_LEASE_GRACE)

    def acquire(self, *, timeout: float | None) -> Turn | None:
        """A turn, or None when none came within ``timeout`` seconds (None: wait for one)."""
        lease = self._limiter.try_acquire(ttl=self.ttl, timeout=timeout)
        if lease is None:
            return None
        return Turn(lease=lease, waited_seconds=lease.waited_seconds)

    def release(self, turn: Turn) -> None:
        """Hand the turn on."""
        self._limiter.release(turn.lease)

    def close(self) -> None:
        """End the semaphore (the controller, when the run ends)."""
        self._limiter.close()

    def stats(self) -> dict[str, int]:
        """Limit, turns in use and the most ever held at once."""
        return dict(self._limiter.stats())


__all__ = [
    "TURNS_PER_PRESTART",
    "TURN_WAIT_LIMIT",
    "Turn",
    "Turns",
    "attempt_cpus",
    "describe_turns",
    "in_flight",
    "prestart_for",
    "turns_key",
]
