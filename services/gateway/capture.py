"""Capture: one ``calls`` row per model request, one ``chains`` row per chain, token arrays once per segment.

``CallWriter.write`` writes a batch of calls in one transaction (the write-behind writer, ``recorder.py``, calls it
after the replies went out): the objects first, then every row by one statement, the ``record_calls`` function
(``migrations/versions/0008_record_calls.py``), so a batch costs the gateway one round trip. Ids were drawn before
the reply (``row_ids.py``), so a record is complete when it is queued and writing it twice is harmless (a call
already present counts as written; counters follow the rows actually inserted).

Per record, inside that statement:
1. **Fence.** The batch's rollout rows are held ``FOR SHARE``; a record whose rollout key is no longer the row's
   key, or whose rollout is no longer ``running``, is ``stale`` (the runner has moved on: a retried attempt, a
   finished rollout) and dropped, its objects deleted — a gateway that stalled past the flush barrier never adds
   rows to the next attempt.
2. **Order.** A record's chain (or, for a new chain, its parent chain) and its parent call must exist or be written
   earlier in the batch; otherwise it is ``deferred`` (another gateway process has not written the call before it
   yet) and retried by the writer (its objects are not written again).
3. Objects (token segment, raw bodies) are written before the rows that point at them.

The token segment, its object key and the raw-body key are ``shared/trajectory.py``'s (``Segment``,
``tokens_key``, ``raw_key``): this module is their one writer, the learner's loader their reader. A segment holds
the call's ``suffix_ids`` (the prompt ids new to the chain), ``sampled_ids``, ``sampled_logprobs`` and
``policy_version``; the full prompt is never stored per call (a chain's prompt is the concatenation of its
segments). Raw bodies go zstd-compressed under ``raw_key`` as ``{"request": <the request body exactly as
received>, "response": <the reply in the caller's shape>}``.

Latency fields: ``queue_ms`` = arrival to the upstream request (binding, parsing, splice); ``inference_ms`` =
upstream request to the last sampled token; ``ttfb_ms`` = arrival to the first byte written to a streaming client
(null when not streaming); ``total_ms`` = arrival to the chain tip's commit (the reply's last bytes follow it; the
rows are written after).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import zstandard
from psycopg.types.json import Jsonb

from shared.db import libpq_url
from shared.objectstore import ObjectNotFound, ObjectStore
from shared.statuses import RolloutStatus
from shared.trajectory import (
    POLICY,
    TEACHER,
    CallSource,
    Segment,
    chain_tokens_prefix,
    raw_key,
    tokens_key,
)


@dataclass(kw_only=True)
class CallRecord:
    """Everything one call records; filled by ``ModelCall`` before the reply, written by ``CallWriter``."""

    rollout_key: str
    rollout_id: str
    run_id: str
    call_id: int
    chain_id: int
    new_chain: bool
    parent_chain_id: int | None
    parent_call_id: int | None
    position: int
    fork_reason: str | None
    provider_api: str
    model_alias: str
    stream: bool
    prompt_tokens: int
    suffix_ids: Sequence[int]
    sampled_ids: list[int]
    sampled_logprobs: list[float]
    finish_reason: str
    tool_call_count: int
    parse_error: str | None
    policy_version: int
    source: CallSource = POLICY
    """``teacher`` when a teacher answered the call (``sampled_logprobs`` then empty: the segment stores NaN)."""
    queue_ms: float
    inference_ms: float
    total_ms: float
    ttfb_ms: float | None
    raw_request: bytes
    response: Callable[[], Any]
    """Renders the reply in the caller's shape (for the raw body), called by the writer unless ``response_body``
    is set."""
    response_body: bytes | None = None
    """The reply's JSON body exactly as it was sent (a non-streamed reply): the raw body reuses it."""
    retemplate_drift: bool | None = None
    drift: asyncio.Future[bool] | None = None
    """The drift check when it was still running at reply time; the writer waits for it."""
    notes: dict[str, Any] = field(default_factory=dict)
    stored: bool = False
    """Its objects are in the store (a deferred record's are not written again)."""

    @property
    def tokens_key(self) -> str:
        return tokens_key(self.run_id, self.rollout_id, self.chain_id, self.position)

    @property
    def raw_key(self) -> str:
        return raw_key(self.run_id, self.rollout_id, self.call_id)


RECORD_CALLS = "SELECT record_calls(%s, %s)"
"""Fence, order and write a batch in one statement (``migrations/versions/0008_record_calls.py``)."""


@dataclass
class WriteOutcome:
    written: list[CallRecord] = field(default_factory=list)
    deferred: list[CallRecord] = field(default_factory=list)
    stale: list[CallRecord] = field(default_factory=list)


def raw_bytes(request: bytes, response: bytes) -> bytes:
    """The request exactly as received and the reply's JSON (both parsed as JSON, so the whole is JSON)."""
    return zstandard.ZstdCompressor(level=3).compress(
        b'{"request":' + request + b',"response":' + response + b"}"
    )


def response_json(record: CallRecord) -> bytes:
    """The reply as the raw body stores it: the bytes sent where the reply was one JSON body, else the whole reply
    rendered in the caller's (non-streamed) shape."""
    if record.response_body is not None:
        return record.response_body
    return json.dumps(record.response(), ensure_ascii=False, default=str).encode()


def _segment(record: CallRecord) -> Segment:
    if record.source == TEACHER:
        return Segment.of_teacher(record.suffix_ids, record.sampled_ids, record.policy_version)
    return Segment.of(record.suffix_ids, record.sampled_ids, record.sampled_logprobs, record.policy_version)


def _objects(record: CallRecord) -> dict[str, bytes]:
    segment = _segment(record).to_bytes()
    return {
        record.tokens_key: segment,
        record.raw_key: raw_bytes(record.raw_request, response_json(record)),
    }


def _put_objects(store: ObjectStore, records: list[CallRecord]) -> None:
    for record in records:
        for key, data in _objects(record).items():
            store.put_bytes(key, data)


class CallWriter:
    """Writes batches of records: objects first, then the rows by one ``record_calls`` statement (migration
    0008) on its own autocommit connection, so a batch costs one round trip and its transaction is that statement.
    Used by one task at a time (the recorder's writer); a connection that failed is replaced on the next batch."""

    def __init__(self, database_url: str, store: ObjectStore) -> None:
        self.conninfo = libpq_url(database_url)
        self.store = store
        self._connection: psycopg.AsyncConnection[Any] | None = None

    async def write(self, records: list[CallRecord]) -> WriteOutcome:
        """Write what can be written of ``records`` (in queue order); see the module docstring."""
        unstored = [record for record in records if not record.stored]
        if unstored:
            await asyncio.to_thread(_put_objects, self.store, unstored)
            for record in unstored:
                record.stored = True
        batch = [_batch_item(record) for record in records]
        connection = await self._connect()
        try:
            cursor = await connection.execute(
                RECORD_CALLS, (Jsonb(batch), RolloutStatus.RUNNING.value), prepare=True
            )
            row = await cursor.fetchone()
        except BaseException:
            self._connection = None
            with contextlib.suppress(Exception):
                await connection.close()
            raise
        assert row is not None
        outcome = WriteOutcome()
        for record, result in zip(records, row[0], strict=True):
            getattr(outcome, result).append(record)
        if outcome.stale:  # the runner has moved on: their objects would only be orphans
            await asyncio.to_thread(_delete_objects, self.store, outcome.stale)
        return outcome

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        if self._connection is None or self._connection.closed:
            self._connection = await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True)
        return self._connection


def _batch_item(record: CallRecord) -> dict[str, Any]:
    item: dict[str, Any] = {"rollout_key": record.rollout_key, "call": _call_row(record)}
    if record.new_chain:
        item["chain"] = {
            "id": record.chain_id,
            "rollout_id": record.rollout_id,
            "parent_chain_id": record.parent_chain_id,
            "fork_reason": record.fork_reason,
            "tokens_prefix": chain_tokens_prefix(record.run_id, record.rollout_id, record.chain_id),
        }
    return item


def _delete_objects(store: ObjectStore, records: list[CallRecord]) -> None:
    for record in records:
        for key in (record.tokens_key, record.raw_key):
            with contextlib.suppress(ObjectNotFound):
                store.delete(key)


def _call_row(record: CallRecord) -> dict[str, Any]:
    return {
        "id": record.call_id,
        "rollout_id": record.rollout_id,
        "chain_id": record.chain_id,
        "parent_call_id": record.parent_call_id,
        "position": record.position,
        "fork_reason": record.fork_reason,
        "provider_api": record.provider_api,
        "model_alias": record.model_alias,
        "stream": record.stream,
        "prompt_tokens": record.prompt_tokens,
        "suffix_tokens": len(record.suffix_ids),
        "completion_tokens": len(record.sampled_ids),
        "finish_reason": record.finish_reason,
        "tool_call_count": record.tool_call_count,
        "parse_error": record.parse_error,
        "policy_version": record.policy_version,
        "source": record.source,
        "retemplate_drift": record.retemplate_drift,
        "queue_ms": record.queue_ms,
        "inference_ms": record.inference_ms,
        "total_ms": record.total_ms,
        "ttfb_ms": record.ttfb_ms,
        "tokens_key": record.tokens_key,
        "raw_key": record.raw_key,
        "notes": record.notes,
    }
