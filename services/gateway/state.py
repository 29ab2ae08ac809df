"""The gateway's process-wide resources, opened and closed in one place (``open_state``, an aiohttp cleanup_ctx).

``GatewayState`` holds the async DB engine and sessions, the object store, the HTTP session to vLLM, the Redis
client (served policy version), the chat format (tokenizer + template) and the splicer with every live rollout's
chain tips. Handlers read it from ``app[STATE]``; nothing else is global.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from services.gateway.binding import RolloutDirectory
from services.gateway.chat_format import ChatFormat
from services.gateway.splice import SpliceMode, Splicer
from services.gateway.upstream import Upstream
from shared.db import async_session_factory, make_async_engine
from shared.events import POLICY_VERSION_KEY
from shared.objectstore import ObjectStore, open_store
from shared.settings import Settings

log = logging.getLogger("harnessrl.gateway")
UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=600)


@dataclass
class GatewayState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    store: ObjectStore
    http: aiohttp.ClientSession
    redis: aioredis.Redis
    chat_format: ChatFormat
    splicer: Splicer
    directory: RolloutDirectory
    upstream: Upstream
    measure_drift: bool
    background: set[asyncio.Task[None]] = field(default_factory=set)

    def track(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the reply (e.g. a late drift update); finished before the state closes."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background gateway work failed", exc_info=task.exception())

    async def served_policy_version(self) -> int | None:
        """The version the inference updater last announced in Redis (a fallback when a reply is unlabeled)."""
        try:
            value = await self.redis.hget(POLICY_VERSION_KEY, "version")  # type: ignore[misc]
        except Exception:
            return None
        return int(value) if value is not None else None


async def open_state(
    settings: Settings,
    *,
    splice_mode: SpliceMode = "splice",
    measure_drift: bool = True,
    inference_urls: list[str] | None = None,
) -> AsyncIterator[GatewayState]:
    """Open every resource; yields the state and closes all of it on the way out."""
    chat_format = await asyncio.to_thread(ChatFormat.load, settings.resolved_model_dir)
    store = await asyncio.to_thread(open_store, settings)
    engine = make_async_engine(settings.database_url, pool_size=10, max_overflow=20)
    connector = aiohttp.TCPConnector(limit=256, keepalive_timeout=60)
    http = aiohttp.ClientSession(timeout=UPSTREAM_TIMEOUT, connector=connector)
    redis_client = aioredis.Redis.from_url(settings.redis_url, decode_responses=True)
    sessions = async_session_factory(engine)
    state = GatewayState(
        settings=settings,
        engine=engine,
        sessions=sessions,
        store=store,
        http=http,
        redis=redis_client,
        chat_format=chat_format,
        splicer=Splicer(chat_format, splice_mode),
        directory=RolloutDirectory(sessions),
        upstream=Upstream(
            http, inference_urls or settings.resolved_inference_urls, settings.served_model_name
        ),
        measure_drift=measure_drift,
    )
    try:
        yield state
    finally:
        if state.background:
            await asyncio.wait(state.background, timeout=30)
        await http.close()
        await redis_client.aclose()  # type: ignore[attr-defined]  # redis>=5 has it; the stubs lag
        await engine.dispose()
