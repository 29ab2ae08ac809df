"""Call and chain ids handed out before their rows exist, taken from the tables' own Postgres sequences in blocks.

The reply goes out before the record is written, yet the chain tip committed before the reply must name the call
(the next call's parent) and, for a new chain, the chain. Ids come from ``calls_id_seq`` / ``chains_id_seq``
(``nextval`` of a block at a time), so they never collide with ids any other writer draws; a process refills
in the background when a block runs low, so a call almost never waits for one. Ids of one process increase in the
order it hands them out; two processes interleave blocks, so order rows by ``position``, not by id.
"""

from __future__ import annotations

import asyncio
from collections import deque

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

BLOCK = 64


class RowIds:
    """Ids of one table (``calls`` or ``chains``) for this process."""

    def __init__(self, engine: AsyncEngine, table: str, block: int = BLOCK) -> None:
        self.engine = engine
        self.table = table
        self.block = block
        self._ids: deque[int] = deque()
        self._refill: asyncio.Task[None] | None = None

    async def _fetch(self) -> None:
        async with self.engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT nextval(pg_get_serial_sequence(:table, 'id')) FROM generate_series(1, :n)"),
                {"table": self.table, "n": self.block},
            )
            self._ids.extend(int(row[0]) for row in rows)

    async def take(self) -> int:
        while not self._ids:
            # A finished refill whose ids others took already is no reason to wait: start the next one. (Awaiting a
            # finished task returns without yielding, so waiting on it again would spin the event loop forever when
            # more takers than a block woke before the refill's done callback ran.)
            await asyncio.shield(self._start_refill())
        if len(self._ids) < self.block // 4:
            self._start_refill()
        return self._ids.popleft()

    def _start_refill(self) -> asyncio.Task[None]:
        """The refill in flight, or a new one when none is."""
        if self._refill is None or self._refill.done():
            self._refill = asyncio.create_task(self._fetch())
            self._refill.add_done_callback(self._refill_done)
        return self._refill

    def _refill_done(self, task: asyncio.Task[None]) -> None:
        if self._refill is task:
            self._refill = None
        if not task.cancelled():
            task.exception()  # retrieved; a failed refill is retried by the next take()
