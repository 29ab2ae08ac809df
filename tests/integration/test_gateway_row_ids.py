"""The gateway's row ids (``services/gateway/row_ids.py``) under a burst: more callers than a block of ids wake at
once, each gets a distinct id from the table's sequence, and none spins the event loop.

The spin was real (``harnessrl bench gateway``, 2 workers at concurrency 128: a gateway worker at 100 % CPU for
minutes, answering nothing): callers woken in the same loop iteration as a refill finished took its whole block, and
the next one awaited that finished refill again — which returns without yielding — before the refill's done callback
could clear it. Real Postgres; the test's loop runs in a thread of its own, so a spin fails the test instead of
hanging the session.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from services.gateway.row_ids import RowIds
from shared.db import make_async_engine

pytestmark = pytest.mark.integration

BLOCK = 4
CALLERS = 5 * BLOCK


class WakesCallersAsTheRefillEnds(RowIds):
    """Real ``nextval`` blocks; the moment the first one is in, the waiting callers are woken — in the same loop
    iteration as the refill finishes, ahead of its done callback."""

    def __init__(self, *args, go: asyncio.Event, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.go = go

    async def _fetch(self) -> None:
        await super()._fetch()
        self.go.set()


async def burst(pg_url: str) -> list[int]:
    engine = make_async_engine(pg_url)
    try:
        go = asyncio.Event()
        ids = WakesCallersAsTheRefillEnds(engine, "calls", block=BLOCK, go=go)

        async def caller() -> int:
            await go.wait()
            return await ids.take()

        callers = [asyncio.create_task(caller()) for _ in range(CALLERS)]
        await asyncio.sleep(0)  # every caller waits for go
        first = await ids.take()
        return [first, *await asyncio.gather(*callers)]
    finally:
        await engine.dispose()


def test_a_burst_larger_than_a_block_gets_distinct_ids_without_spinning(pg_url: str) -> None:
    result: list[list[int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(burst(pg_url)))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the burst never finished: a caller spins on a finished refill"
    assert not errors, errors
    (taken,) = result
    assert len(taken) == CALLERS + 1 and len(set(taken)) == len(taken)
