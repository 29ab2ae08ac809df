"""Capture: one ``calls`` row per model request, one ``chains`` row per chain, token arrays once per segment.

``write_records`` writes a batch of calls in one transaction (the write-behind writer, ``recorder.py``, calls it
after the replies went out). Ids were drawn before the reply (``row_ids.py``), so a record is complete when it is
queued and writing it twice is harmless (``ON CONFLICT DO NOTHING``; counters follow the rows actually inserted).

Per record, inside the transaction:
1. **Fence.** The rollout's row is read ``FOR SHARE``; a record whose rollout key is no longer the row's key, or
   whose rollout is no longer ``running``, is ``stale`` (the runner has moved on: a retried attempt, a finished
   rollout) and dropped — a gateway that stalled past the flush barrier never adds rows to the next attempt.
2. **Order.** A record's chain (or, for a new chain, its parent chain) and its parent call must exist or be written
   earlier in the batch; otherwise it is ``deferred`` (another gateway process has not written the call before it
   yet) and retried by the writer.
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
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import zstandard
from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from shared.models import Call, Chain, Rollout
from shared.objectstore import ObjectStore
from shared.statuses import RolloutStatus
from shared.trajectory import Segment, chain_tokens_prefix, raw_key, tokens_key


@dataclass
class CallRecord:
    """Everything one call records; filled by ``ModelCall`` before the reply, written by ``write_records``."""

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
    suffix_ids: list[int]
    sampled_ids: list[int]
    sampled_logprobs: list[float]
    finish_reason: str
    tool_call_count: int
    parse_error: str | None
    policy_version: int
    queue_ms: float
    inference_ms: float
    total_ms: float
    ttfb_ms: float | None
    raw_request: bytes
    response: Callable[[], Any]
    """Renders the reply in the caller's shape (for the raw body), called by the writer."""
    retemplate_drift: bool | None = None
    drift: asyncio.Future[bool] | None = None
    """The drift check when it was still running at reply time; the writer waits for it."""
    notes: dict[str, Any] = field(default_factory=dict)


_CHAINS = cast(Table, Chain.__table__)
_CALLS = cast(Table, Call.__table__)
INSERT_CHAIN = insert(_CHAINS).on_conflict_do_nothing(index_elements=["id"])
INSERT_CALL = insert(_CALLS)
"""Plain: ``write_records`` skips the calls already present (read in the same transaction), and only the process
holding a call's record writes it, so a conflict cannot happen; without ``RETURNING`` or ``ON CONFLICT`` the batch
goes out as one prepared statement executed per row (psycopg's pipelined ``executemany``) instead of a multi-row
``VALUES`` whose text — and parse — changes with the batch size."""
COUNT_CALLS = (
    update(_CHAINS)
    .where(_CHAINS.c.id == bindparam("chain"))
    .values(
        n_calls=_CHAINS.c.n_calls + bindparam("calls"),
        suffix_tokens=_CHAINS.c.suffix_tokens + bindparam("suffix"),
        sampled_tokens=_CHAINS.c.sampled_tokens + bindparam("sampled"),
    )
)


@dataclass
class WriteOutcome:
    written: list[CallRecord] = field(default_factory=list)
    deferred: list[CallRecord] = field(default_factory=list)
    stale: list[CallRecord] = field(default_factory=list)


def raw_bytes(request: bytes, response: Any) -> bytes:
    """The request exactly as received (it parsed as JSON, so the whole is JSON) and the rendered reply."""
    payload = b'{"request":' + request + b',"response":'
    payload += json.dumps(response, ensure_ascii=False, default=str).encode() + b"}"
    return zstandard.ZstdCompressor(level=3).compress(payload)


def _objects(record: CallRecord) -> dict[str, bytes]:
    segment = Segment.of(
        record.suffix_ids, record.sampled_ids, record.sampled_logprobs, record.policy_version
    ).to_bytes()
    return {
        tokens_key(record.run_id, record.rollout_id, record.chain_id, record.position): segment,
        raw_key(record.run_id, record.rollout_id, record.call_id): raw_bytes(
            record.raw_request, record.response()
        ),
    }


def _put_objects(store: ObjectStore, records: list[CallRecord]) -> None:
    for record in records:
        for key, data in _objects(record).items():
            store.put_bytes(key, data)


async def write_records(session: AsyncSession, store: ObjectStore, records: list[CallRecord]) -> WriteOutcome:
    """Write what can be written of ``records`` (in queue order) in the session's transaction; see the module
    docstring. The caller commits."""
    outcome = WriteOutcome()
    rollouts = {
        row.id: row
        for row in await session.execute(
            select(Rollout.id, Rollout.rollout_key, Rollout.status)
            .where(Rollout.id.in_({r.rollout_id for r in records}))
            .with_for_update(read=True)
        )
    }
    chains_needed = {r.parent_chain_id if r.new_chain else r.chain_id for r in records} - {None}
    chains_present = (
        set(await session.scalars(select(Chain.id).where(Chain.id.in_(chains_needed))))
        if chains_needed
        else set()
    )
    calls_needed = {r.parent_call_id for r in records if r.parent_call_id is not None}
    calls_needed |= {r.call_id for r in records}
    calls_present = set(await session.scalars(select(Call.id).where(Call.id.in_(calls_needed))))
    accepted: list[CallRecord] = []
    for record in records:
        row = rollouts.get(record.rollout_id)
        if row is None or row.rollout_key != record.rollout_key or row.status != RolloutStatus.RUNNING:
            outcome.stale.append(record)
            continue
        if (
            record.call_id in calls_present
        ):  # written before (a retried batch whose commit was not acknowledged)
            outcome.written.append(record)
            continue
        chain_ok = (
            record.parent_chain_id is None or record.parent_chain_id in chains_present
            if record.new_chain
            else record.chain_id in chains_present
        )
        if not chain_ok or (record.parent_call_id is not None and record.parent_call_id not in calls_present):
            outcome.deferred.append(record)
            continue
        accepted.append(record)
        chains_present.add(record.chain_id)
        calls_present.add(record.call_id)
    if not accepted:
        return outcome
    await asyncio.to_thread(_put_objects, store, accepted)
    new_chains = [
        {
            "id": r.chain_id,
            "rollout_id": r.rollout_id,
            "parent_chain_id": r.parent_chain_id,
            "fork_reason": r.fork_reason,
            "tokens_prefix": chain_tokens_prefix(r.run_id, r.rollout_id, r.chain_id),
            "n_calls": 0,
            "suffix_tokens": 0,
            "sampled_tokens": 0,
        }
        for r in accepted
        if r.new_chain
    ]
    # Core statements with executemany: compiled once per process (a multi-row VALUES is compiled per batch).
    if new_chains:
        await session.execute(INSERT_CHAIN, new_chains)
    await session.execute(INSERT_CALL, [_call_row(r) for r in accepted])
    counters: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for record in accepted:
        counter = counters[record.chain_id]
        counter[0] += 1
        counter[1] += len(record.suffix_ids)
        counter[2] += len(record.sampled_ids)
    if counters:
        await session.execute(
            COUNT_CALLS,
            [
                {"chain": chain_id, "calls": c[0], "suffix": c[1], "sampled": c[2]}
                for chain_id, c in counters.items()
            ],
        )
    outcome.written += accepted
    return outcome


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
        "retemplate_drift": record.retemplate_drift,
        "queue_ms": record.queue_ms,
        "inference_ms": record.inference_ms,
        "total_ms": record.total_ms,
        "ttfb_ms": record.ttfb_ms,
        "tokens_key": tokens_key(record.run_id, record.rollout_id, record.chain_id, record.position),
        "raw_key": raw_key(record.run_id, record.rollout_id, record.call_id),
        "notes": record.notes,
    }
