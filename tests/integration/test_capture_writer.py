"""The write-behind's batch writer (``services/gateway/capture.py``: ``CallWriter`` and migration 0008's
``record_calls``) on real Postgres and the test object store: the fence, the order rule, a retried batch, a batch
with a bad row, and a connection that died between batches."""

from __future__ import annotations

import itertools
import secrets
from typing import Any

import psycopg
import pytest
from sqlalchemy import select

from services.gateway.capture import CallRecord, CallWriter
from shared.db import libpq_url, session_scope
from shared.models import Call, Chain
from shared.objectstore import ObjectNotFound
from shared.trajectory import Segment, raw_key, tokens_key

pytestmark = pytest.mark.integration

_ids = itertools.count(secrets.randbelow(10**9) * 1000 + 10**12)


def record(
    ref: Any, *, chain_id: int, position: int, parent_call_id: int | None = None, **fields: Any
) -> CallRecord:
    values: dict[str, Any] = {
        "rollout_key": ref.rollout_key,
        "rollout_id": ref.rollout_id,
        "run_id": ref.run_id,
        "call_id": next(_ids),
        "chain_id": chain_id,
        "new_chain": position == 0,
        "parent_chain_id": None,
        "parent_call_id": parent_call_id,
        "position": position,
        "fork_reason": None,
        "provider_api": "openai_chat",
        "model_alias": "policy",
        "stream": False,
        "prompt_tokens": 5 + 3 * position,
        "suffix_ids": [1, 2, 3, 4, 5] if position == 0 else [7],
        "sampled_ids": [8, 9],
        "sampled_logprobs": [-0.5, -0.25],
        "finish_reason": "stop",
        "tool_call_count": 0,
        "parse_error": None,
        "policy_version": 3,
        "queue_ms": 1.0,
        "inference_ms": 2.0,
        "total_ms": 3.5,
        "ttfb_ms": None,
        "raw_request": b'{"messages": []}',
        "response": lambda: {"choices": []},
        "notes": {"source": "test"},
    }
    values.update(fields)
    return CallRecord(**values)


def episode(ref: Any, calls: int) -> list[CallRecord]:
    """``calls`` records of one chain, each extending the one before."""
    chain_id = next(_ids)
    records: list[CallRecord] = []
    for position in range(calls):
        parent = records[-1].call_id if records else None
        records.append(record(ref, chain_id=chain_id, position=position, parent_call_id=parent))
    return records


@pytest.fixture
async def writer(settings, store):  # type: ignore[no-untyped-def]
    call_writer = CallWriter(settings.database_url, store)
    yield call_writer
    await call_writer.close()


def rows(db, chain_id: int) -> tuple[Chain | None, list[Call]]:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        chain = session.get(Chain, chain_id)
        calls = list(session.scalars(select(Call).where(Call.chain_id == chain_id).order_by(Call.position)))
        session.expunge_all()
    return chain, calls


async def test_a_batch_lands_in_order_with_its_objects_and_counters(writer, make_rollout, db, store):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    records = episode(ref, 3)
    outcome = await writer.write(records)
    assert outcome.written == records and not outcome.deferred and not outcome.stale
    chain, calls = rows(db, records[0].chain_id)
    assert chain is not None and (chain.n_calls, chain.suffix_tokens, chain.sampled_tokens) == (3, 7, 6)
    assert [c.id for c in calls] == [r.call_id for r in records]
    assert [c.parent_call_id for c in calls] == [None, records[0].call_id, records[1].call_id]
    first = calls[0]
    assert (first.provider_api, first.model_alias, first.prompt_tokens, first.suffix_tokens) == (
        "openai_chat",
        "policy",
        5,
        5,
    )
    assert (first.completion_tokens, first.policy_version, first.total_ms, first.ttfb_ms) == (2, 3, 3.5, None)
    assert first.notes == {"source": "test"} and first.created_at is not None
    segment = Segment.from_bytes(store.get_bytes(first.tokens_key))
    assert segment.sampled_ids.tolist() == [8, 9] and segment.suffix_ids.tolist() == [1, 2, 3, 4, 5]
    assert first.raw_key == raw_key(ref.run_id, ref.rollout_id, first.id) and store.exists(first.raw_key)


async def test_a_call_whose_parent_is_not_written_yet_is_deferred_then_lands(writer, make_rollout, db):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    first, second, third = episode(ref, 3)
    outcome = await writer.write([second, third])  # another process holds ``first``, not written yet
    assert outcome.deferred == [second, third] and not outcome.written
    assert rows(db, first.chain_id) == (None, [])
    assert (await writer.write([first])).written == [first]
    assert (await writer.write([second, third])).written == [second, third]
    chain, calls = rows(db, first.chain_id)
    assert chain is not None and chain.n_calls == 3 and len(calls) == 3


async def test_a_batch_written_twice_records_each_call_once(writer, make_rollout, db):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    records = episode(ref, 2)
    await writer.write(records)
    again = await writer.write(records)  # a retried batch whose commit was not acknowledged
    assert again.written == records
    chain, calls = rows(db, records[0].chain_id)
    assert chain is not None and chain.n_calls == 2 and chain.sampled_tokens == 4 and len(calls) == 2


async def test_records_of_a_rollout_the_runner_moved_on_from_are_dropped_with_their_objects(  # type: ignore[no-untyped-def]
    writer, make_rollout, db, store
):
    live = make_rollout()
    [kept] = episode(live, 1)
    [old_key] = episode(live, 1)
    old_key.rollout_key = "an-earlier-attempts-key"
    finished = make_rollout(status="finished")
    [late] = episode(finished, 1)
    outcome = await writer.write([old_key, kept, late])
    assert outcome.stale == [old_key, late] and outcome.written == [kept]
    for r in (old_key, late):
        assert rows(db, r.chain_id) == (None, [])
        for key in (
            tokens_key(r.run_id, r.rollout_id, r.chain_id, r.position),
            raw_key(r.run_id, r.rollout_id, r.call_id),
        ):
            with pytest.raises(ObjectNotFound):
                store.get_bytes(key)


async def test_a_bad_row_fails_the_whole_batch_and_writes_none_of_it(writer, make_rollout, db):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    good, bad = episode(ref, 2)
    bad.provider_api = "not-an-api"  # the table's check constraint refuses it
    with pytest.raises(psycopg.errors.CheckViolation):
        await writer.write([good, bad])
    assert rows(db, good.chain_id) == (None, [])
    bad.provider_api = "openai_chat"
    assert (await writer.write([good, bad])).written == [good, bad]


async def test_a_connection_that_died_between_batches_is_replaced(writer, make_rollout, db, settings):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    first, second = episode(ref, 2)
    await writer.write([first])
    backend = writer._connection.info.backend_pid
    with psycopg.connect(libpq_url(settings.database_url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
    with pytest.raises(psycopg.OperationalError):  # the batch in flight fails; the recorder retries it
        await writer.write([second])
    assert (await writer.write([second])).written == [second]
    chain, calls = rows(db, first.chain_id)
    assert chain is not None and chain.n_calls == 2 and len(calls) == 2
