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
            await self._refilled()
        if len(self._ids) < self.block // 4 and self._refill is None:
            self._refill = asyncio.create_task(self._fetch())
            self._refill.add_done_callback(self._refill_done)
        return self._ids.popleft()

    async def _refilled(self) -> None:
        if self._refill is None:
            self._refill = asyncio.create_task(self._fetch())
            self._refill.add_done_callback(self._refill_done)
        await asyncio.shield(self._refill)

    def _refill_done(self, task: asyncio.Task[None]) -> None:
        self._refill = None
        if not task.cancelled():
            task.exception()  # retrieved; a failed refill is retried by the next take()
