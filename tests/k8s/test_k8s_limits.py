"""Creation and deletion slot pools of one process (the cluster-wide pool is tested with
the Ray head of tests/ray_jobs)."""

from __future__ import annotations

import threading
import time

import pytest

from dataspace.sandbox.kubernetes._slots import SlotTimeoutError, ThreadSlots


def test_thread_slots_block_at_the_limit_and_wake_on_release() -> None:
    slots = ThreadSlots()
    first = slots.acquire("create", 1, timeout=5, ttl=60)
    got: list[str] = []
    waiter = threading.Thread(
        target=lambda: got.append(slots.acquire("create", 1, timeout=5, ttl=60))
    )
    waiter.start()
    time.sleep(0.1)
    assert got == []  # still waiting for the one slot
    slots.release("create", first)
    waiter.join(5)
    assert len(got) == 1 and slots.held("create") == 1
    assert slots.held("delete") == 0  # pools are independent
    with pytest.raises(SlotTimeoutError, match="no create slot free"):
        slots.acquire("create", 1, timeout=0.1, ttl=60)


def test_an_expired_lease_is_reclaimed() -> None:
    """Guards against a controller that died holding a slot blocking creations for ever."""
    slots = ThreadSlots()
    slots.acquire("create", 1, timeout=1, ttl=0.05)
    time.sleep(0.1)
    assert slots.acquire("create", 1, timeout=1, ttl=60)
