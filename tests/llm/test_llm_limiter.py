"""The per-endpoint concurrency cap shared through a named Ray actor."""

from __future__ import annotations

import pytest

from dataspace.llm.limiter import LocalLimiter, RayLimiter, endpoint_key, get_limiter


def test_local_limiter_reclaims_expired_leases():
    lim = LocalLimiter(1)
    stale = lim.acquire(ttl=0.05)  # a holder that died without releasing
    fresh = lim.acquire(ttl=10)  # waits for the expiry, then gets the permit
    assert fresh.waited_seconds >= 0.03 and lim.in_use() == 1
    lim.release(stale)
    lim.release(fresh)
    assert lim.in_use() == 0


def test_without_ray_the_limiter_is_process_local():
    key = endpoint_key("http://127.0.0.1:1/v1", "m-local")
    assert get_limiter(key, 3, use_ray=False) is get_limiter(key, 3, use_ray=False)


@pytest.mark.ray
def test_ray_limiter_is_shared_by_name():
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        key = endpoint_key("http://127.0.0.1:1/v1", "m-ray")
        a = get_limiter(key, 2)
        b = RayLimiter(key, 2)  # another worker asking for the same endpoint
        assert isinstance(a, RayLimiter)
        l1 = a.acquire(ttl=30)
        l2 = b.acquire(ttl=30)
        assert b.stats()["in_use"] == 2
        a.release(l1)
        a.release(l2)

        @ray.remote(num_cpus=0)
        def hold(k: str) -> int:
            lim = get_limiter(k, 2)
            lease = lim.acquire(ttl=30)
            n = lim.stats()["in_use"]
            lim.release(lease)
            return n

        assert ray.get(hold.remote(key)) >= 1
        assert b.stats()["peak"] == 2
        ray.kill(ray.get_actor(key, namespace="dataspace"))
    finally:
        if started:
            ray.shutdown()
