"""The gateway's Redis clients take a burst of calls in flight past redis-py's default pool size.

redis-py 8 caps a default connection pool at 100 and fails the 101st concurrent command with "Too many
connections"; a gateway process holds one connection per call in flight (binding, tip commit), so a burst of
calls answered 503 (``harnessrl bench gateway`` at concurrency 128 did). Real Redis, 150 commands held at once.
"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from services.gateway.state import REDIS_POOL_MAX, redis_for_calls

pytestmark = pytest.mark.integration

IN_FLIGHT = 150


async def hold_connections(client: aioredis.Redis, prefix: str) -> None:
    """IN_FLIGHT commands that each keep their connection busy for 0.3 s, all at once."""
    await asyncio.gather(*(client.blpop([f"{prefix}-{i}"], timeout=0.3) for i in range(IN_FLIGHT)))


async def test_a_burst_past_the_default_pool_size_waits_instead_of_failing(redis_url: str) -> None:
    assert IN_FLIGHT < REDIS_POOL_MAX
    client = redis_for_calls(redis_url, decode_responses=True)
    try:
        await hold_connections(client, "pool-test")
        assert await client.ping()
    finally:
        await client.aclose()


async def test_the_default_pool_fails_the_same_burst(redis_url: str) -> None:
    """The failure the gateway's pool avoids (if redis-py drops its cap, this says the guard is no longer needed)."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        if client.connection_pool.max_connections >= IN_FLIGHT:
            pytest.skip(f"this redis-py has no pool cap below {IN_FLIGHT}")
        with pytest.raises(aioredis.ConnectionError, match="Too many connections"):
            await hold_connections(client, "pool-default")
    finally:
        await client.aclose()
