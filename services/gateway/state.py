"""The gateway's process-wide resources, opened and closed in one place (``open_state``, an aiohttp cleanup_ctx).

``GatewayState`` holds the async DB engine and sessions, the object store, the HTTP session to vLLM, the Redis
clients (served policy version; chain tips and this process's lease), the chat format (tokenizer + template), the
splicer, the tip store, the id blocks and the write-behind recorder. Handlers read it from ``app[STATE]``; nothing
else is global. Every gateway process (``serve gateway --workers N``) has its own state; what they share lives in
Redis and Postgres.

Shutdown order: the app stops taking requests, the recorder drains its queue, then the lease is dropped — so a
clean exit never leaves a call pending, and only a crash does (``shared/capture_state.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import redis.asyncio as aioredis
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from services.gateway.binding import RolloutDirectory
from services.gateway.capture import CallWriter
from services.gateway.chat_format import ChatFormat
from services.gateway.recorder import Recorder
from services.gateway.row_ids import RowIds
from services.gateway.splice import SpliceMode, Splicer
from services.gateway.teacher import Teachers
from services.gateway.tips import TipStore
from services.gateway.upstream import Upstream
from shared.adapters import served_adapter_key
from shared.db import async_session_factory, make_async_engine
from shared.incidents import note_boot_async
from shared.objectstore import ObjectStore, open_store
from shared.settings import Settings

log = logging.getLogger("harnessrl.gateway")
UPSTREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=600)


@dataclass(kw_only=True)
class GatewayState:
    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    store: ObjectStore
    http: aiohttp.ClientSession
    redis: aioredis.Redis
    chat_format: ChatFormat
    splicer: Splicer
    tips: TipStore
    recorder: Recorder
    call_ids: RowIds
    chain_ids: RowIds
    directory: RolloutDirectory
    upstream: Upstream
    teachers: Teachers
    """Who answers a run's calls when it names a teacher (``teacher.py``)."""
    measure_drift: bool
    background: set[asyncio.Task[None]] = field(default_factory=set)
    # Characters the vocabulary's longest token spells: no token covers more (request_checks.prompt_token_floor).
    longest_token_chars: int = 1
    _engine_limit: int | None = None
    _next_limit_probe: float = 0.0

    @property
    def checks_drift(self) -> bool:
        """Whether a spliced call's retemplate drift is measured: splice mode with ``measure_drift`` on."""
        return self.measure_drift and self.splicer.mode == "splice"

    def track(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the reply (e.g. a late drift update); finished before the state closes."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background gateway work failed", exc_info=task.exception())

    async def context_limit(self) -> int:
        """The context the engine really serves: the smaller of ``settings.max_model_len`` and what the inference
        replicas report (asked until one answers, then remembered)."""
        if self._engine_limit is None and time.monotonic() >= self._next_limit_probe:
            self._next_limit_probe = time.monotonic() + 10.0
            self._engine_limit = await self.upstream.max_model_len(self.http)
        return min(self.settings.max_model_len, self._engine_limit or self.settings.max_model_len)

    async def served_adapter(self, run_id: str) -> str | None:
        """The newest adapter of a LoRA run that the updater made vLLM serve (None: none yet, the base model)."""
        value = await self.redis.get(served_adapter_key(self.redis, run_id))
        return value.decode() if isinstance(value, bytes) else value


REDIS_POOL_MAX = 1024
"""Connections one gateway process may hold per Redis client: every call in flight holds one while it binds and
commits its tip, and the writer holds more. redis-py 8 caps a default pool at 100 and answers the 101st with
"Too many connections", which a burst of calls (a benchmark at concurrency 128, or many groups at once) reached."""
REDIS_POOL_WAIT_S = 30.0
"""Past ``REDIS_POOL_MAX``, a call waits this long for a free connection before it fails."""


def redis_for_calls(url: str, *, decode_responses: bool) -> aioredis.Redis:
    """An asyncio Redis client whose pool waits for a free connection instead of failing past its size."""
    pool: aioredis.BlockingConnectionPool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=REDIS_POOL_MAX, timeout=REDIS_POOL_WAIT_S, decode_responses=decode_responses
    )
    return aioredis.Redis.from_pool(pool)  # type: ignore[attr-defined]  # (types-redis predates from_pool)


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
    redis_client = redis_for_calls(settings.redis_url, decode_responses=True)
    tip_redis = redis_for_calls(settings.redis_url, decode_responses=False)
    sessions = async_session_factory(engine)
    owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    tips = TipStore(tip_redis, owner, max_in_flight=settings.gateway_max_calls_in_flight_per_rollout)
    state = GatewayState(
        settings=settings,
        engine=engine,
        sessions=sessions,
        store=store,
        http=http,
        redis=redis_client,
        chat_format=chat_format,
        splicer=Splicer(chat_format, splice_mode),
        tips=tips,
        recorder=Recorder(
            CallWriter(settings.database_url, store), tip_redis, linger_s=settings.capture_linger_ms / 1000
        ),
        call_ids=RowIds(engine, "calls"),
        chain_ids=RowIds(engine, "chains"),
        directory=RolloutDirectory(engine, tips),
        upstream=Upstream(
            http, inference_urls or settings.resolved_inference_urls, settings.served_model_name
        ),
        teachers=Teachers(http, sessions, chat_format),
        measure_drift=measure_drift,
        longest_token_chars=max(map(len, chat_format.tokenizer.get_vocab()), default=1),
    )
    # A (re)start the runner can see (shared/incidents.py): calls in flight died with the predecessor.
    try:
        await note_boot_async(redis_client, "gateway")
    except Exception as exc:  # Redis down: the gateway still serves; the runner just sees less
        log.warning("could not count this gateway start in Redis: %s", exc)
    await tips.start_lease()
    state.recorder.start()
    try:
        yield state
    finally:
        if state.background:
            await asyncio.wait(state.background, timeout=30)
        await state.recorder.close()
        await tips.stop_lease()
        await http.close()
        await redis_client.aclose()  # type: ignore[attr-defined]  # redis>=5 has it; the stubs lag
        await tip_redis.aclose()  # type: ignore[attr-defined]
        await engine.dispose()
