"""The controller's key holder: model keys handed to attempt workers in memory only.

A Ray ``runtime_env`` is written to Ray's logs (``runtime_env_agent.log``) and to its
session files, so keys never travel that way. Instead the controller starts one small
actor, :class:`KeyHolder`, and puts the keys it reads from its own environment into it
with a method call; an attempt asks the holder for the one variable its model needs,
keeps it in process memory (``dataspace.llm.keys``) while it runs, and drops it after.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dataspace.errors import InfrastructureError

logger = logging.getLogger(__name__)


class KeyHolder:
    """Keys by variable name, in the memory of one Ray actor owned by the controller."""

    def __init__(self) -> None:
        self._keys: dict[str, str] = {}

    def put(self, keys: Mapping[str, str]) -> int:
        """Store ``keys``; returns how many the holder now has."""
        self._keys.update(keys)
        return len(self._keys)

    def get(self, names: list[str]) -> dict[str, str]:
        """The keys among ``names`` that the controller had set."""
        return {n: self._keys[n] for n in names if n in self._keys}

    def __repr__(self) -> str:  # never show the keys, whatever prints the actor
        return f"KeyHolder({len(self._keys)} keys)"


def controller_keys(names: Iterable[str]) -> dict[str, str]:
    """The keys of ``names`` set in this (the controller's) environment."""
    return {n: os.environ[n] for n in sorted(set(names)) if os.environ.get(n)}


def start_key_holder(keys: Mapping[str, str]) -> Any:
    """Start the holder actor on the connected Ray cluster and load ``keys`` into it."""
    import ray

    actor: Any = ray.remote(num_cpus=0, max_restarts=0)(KeyHolder)
    holder = actor.remote()
    ray.get(holder.put.remote(dict(keys)))
    return holder


def stop_key_holder(holder: Any) -> None:
    """End the holder actor (its memory goes with it)."""
    if holder is None:
        return
    import ray

    try:
        ray.kill(holder, no_restart=True)
    except Exception:  # the cluster may already be gone
        logger.debug("stopping the key holder failed", exc_info=True)


@contextmanager
def attempt_keys(holder: Any, names: Iterable[str]) -> Iterator[None]:
    """Within the block, the holder's keys of ``names`` are visible to the model client.

    Without a holder (an attempt run in the controller's own process) nothing is fetched:
    the client reads the environment.

    Raises:
        InfrastructureError: the holder cannot be reached (code ``keys``).
    """
    from dataspace.llm.keys import provided_keys

    wanted = sorted({n for n in names if n})
    if holder is None or not wanted:
        yield
        return
    import ray

    try:
        keys = ray.get(holder.get.remote(wanted), timeout=60)
    except Exception as exc:
        raise InfrastructureError(
            f"the controller's key holder could not be reached: {type(exc).__name__}",
            code="keys",
        ) from None
    with provided_keys(keys):
        yield


__all__ = [
    "KeyHolder",
    "attempt_keys",
    "controller_keys",
    "start_key_holder",
    "stop_key_holder",
]
