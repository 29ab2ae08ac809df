"""Who gets the inference pool (``services/api/scheduler.py: PoolGate``), on a database and a Redis db of its own
(other tests leave runs active in the shared ones): first come first served; a full-weight run waits until no
run is active and the pool serves it at version 0, after asking the updater for the rebase on the weights
channel; LoRA runs share the pool with each other but never with a full-weight run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import select

from services.api.scheduler import PoolGate
from shared import migrate
from shared.db import async_session_factory, make_async_engine, make_engine, session_factory, session_scope
from shared.events import connect, rebase_request, weights_channel
from shared.models import Group, Run
from shared.pool import mark_starting, set_served
from shared.statuses import RunStatus
from tests.fixtures.services import redis_db_for, run_row
from tests.fixtures.suite import PG_ADMIN_URL, flushed_redis_db, fresh_database

pytestmark = pytest.mark.integration

POOL_REDIS_DB = redis_db_for("HARNESSRL_TEST_POOL_REDIS_DB", 13)
LORA = {"rank": 4}


@pytest.fixture
def pool_env() -> Iterator[tuple[str, str]]:
    with fresh_database() as url, flushed_redis_db(POOL_REDIS_DB) as redis_url:
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        migrate.upgrade(url)
        yield url, redis_url


class Pool:
    def __init__(self, database_url: str, redis_url: str) -> None:
        self.engine = make_engine(database_url)
        self.db = session_factory(self.engine)
        self.database_url = database_url
        self.redis = connect(redis_url)
        self.gate = PoolGate(redis_url, exclusive=True, resend_s=0.0)
        self.created = datetime.now(UTC)

    def add(self, name: str, status: str, lora: dict[str, Any] | None = None, **more: Any) -> str:
        self.created += timedelta(seconds=1)  # creation order is the queue's order
        fields: dict[str, Any] = ({"lora": lora} if lora else {}) | more
        run = run_row(f"run_{name}", "reference", group_size=1, task_ids=[], **fields)
        run.status, run.created_at = status, self.created
        with session_scope(self.db) as session:
            session.add(run)
        return run.id

    def promote(self) -> list[str]:
        async def go() -> list[str]:
            engine = make_async_engine(self.database_url)
            try:
                return await self.gate.promote(async_session_factory(engine))
            finally:
                await engine.dispose()

        return asyncio.run(go())

    def statuses(self) -> dict[str, str]:
        with session_scope(self.db) as session:
            return {r.id: r.status for r in session.scalars(select(Run))}

    def set_status(self, run_id: str, status: str) -> None:
        with session_scope(self.db) as session:
            run = session.get(Run, run_id)
            assert run is not None
            run.status = status

    def close(self) -> None:
        self.gate.close()
        self.redis.close()
        self.engine.dispose()


@pytest.fixture
def pool(pool_env: tuple[str, str]) -> Iterator[Pool]:
    p = Pool(*pool_env)
    yield p
    p.close()


def test_a_full_weight_run_waits_for_the_pool_and_asks_for_the_rebase(pool: Pool) -> None:
    set_served(pool.redis, "", 0)  # the updater serves the base model for no run
    first = pool.add("a", RunStatus.QUEUED)
    second = pool.add("b", RunStatus.QUEUED)
    pubsub = pool.redis.pubsub()
    pubsub.subscribe(weights_channel(pool.redis))
    pubsub.get_message(timeout=1)  # the subscription itself

    events = pool.promote()
    assert pool.statuses() == {first: "queued", second: "queued"}, events
    message = pubsub.get_message(timeout=2)
    assert message is not None and rebase_request(json.loads(message["data"])) == first, message

    mark_starting(pool.redis)  # the updater is swapping: not yet
    pool.promote()
    assert pool.statuses()[first] == "queued"

    set_served(pool.redis, first, 0)  # rebased: the pool serves the first run at version 0
    events = pool.promote()
    assert pool.statuses() == {first: "running", second: "queued"}, events
    with session_scope(pool.db) as session:
        assert session.scalars(select(Group).where(Group.run_id == first)).all() == []  # no tasks: no groups

    pool.promote()  # the first holds the pool: the second waits, even if the pool named it
    set_served(pool.redis, second, 0)
    pool.promote()
    assert pool.statuses()[second] == "queued"
    pool.set_status(first, RunStatus.COMPLETED)
    pool.promote()
    assert pool.statuses()[second] == "running"
    pubsub.close()


def test_lora_runs_share_the_pool_but_never_with_a_full_weight_run(pool: Pool) -> None:
    set_served(pool.redis, "", 0)
    lora_a = pool.add("lora_a", RunStatus.RUNNING, LORA)
    lora_b = pool.add("lora_b", RunStatus.QUEUED, LORA)
    full = pool.add("full", RunStatus.QUEUED)
    lora_c = pool.add("lora_c", RunStatus.QUEUED, LORA)

    pool.promote()  # a LoRA run beside a LoRA run: at once, no rebase
    assert pool.statuses()[lora_b] == "running"
    pool.promote()  # the full-weight run is next in line and waits; the LoRA run behind it waits its turn
    assert (pool.statuses()[full], pool.statuses()[lora_c]) == ("queued", "queued")

    pool.set_status(lora_a, RunStatus.COMPLETED)
    pool.set_status(lora_b, RunStatus.STOPPED)
    set_served(pool.redis, full, 0)
    pool.promote()
    assert pool.statuses()[full] == "running"
    pool.promote()  # a LoRA run never shares with a full-weight run
    assert pool.statuses()[lora_c] == "queued"


def test_an_unmanaged_pool_starts_the_oldest_queued_run_without_a_rebase(pool: Pool) -> None:
    """No updater ever wrote the pool's state (a bare vLLM, the scripted policy): one run at a time still."""
    first = pool.add("a", RunStatus.QUEUED)
    second = pool.add("b", RunStatus.QUEUED)
    pool.promote()
    assert pool.statuses() == {first: "running", second: "queued"}


def test_an_sft_run_never_holds_the_pool(pool: Pool) -> None:
    """An SFT run samples nothing: while it trains, a queued full-weight run starts as if it were not there."""
    set_served(pool.redis, "", 0)
    sft = pool.add("sft", RunStatus.RUNNING, sft={"from_run": "run_x", "rollout_ids": ["ro_1"]})
    queued = pool.add("a", RunStatus.QUEUED)
    with session_scope(pool.db) as session:
        assert session.get(Run, sft).kind == "sft"  # type: ignore[union-attr]
    set_served(pool.redis, queued, 0)
    pool.promote()
    assert pool.statuses() == {sft: "running", queued: "running"}
