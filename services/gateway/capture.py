"""Capture: one ``calls`` row per model request, one ``chains`` row per chain, token arrays once per segment.

``record_call`` runs after sampling, before the reply's last bytes go out, so a harness never gets an answer that
was not recorded. In one transaction it creates the chain row (for a new chain), writes the token segment and the
raw bodies to the object store, inserts the call row and bumps the chain's counters. Object-store writes happen
before the commit, so a row never points at a missing object; a failure rolls the rows back.

Token segment ``tokens/<run>/<rollout>/<chain>/<position>.npz`` (``shared.trajectory`` reads it back):
``prompt_ids`` (int32: ids new to the chain — the whole prompt at position 0, else the closing token of a cut
reply and the new suffix; loss mask 0), ``sampled_ids`` (int32, loss mask 1), ``sampled_logprobs`` (float32) and
``policy_version`` (int64 scalar). The full prompt is never stored per call: a chain's prompt is the concatenation
of its segments. Raw request and response bodies go zstd-compressed to ``raw/<run>/<rollout>/<call>.json.zst``.

Latency fields: ``queue_ms`` = arrival to the upstream request (binding, parsing, splice, waiting for the rollout's
lock); ``inference_ms`` = upstream request to the last sampled token; ``ttfb_ms`` = arrival to the first byte
written to a streaming client (null when not streaming); ``total_ms`` = arrival to the record.
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zstandard
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from shared.db import async_session_scope
from shared.models import Call, Chain
from shared.objectstore import ObjectStore


@dataclass
class CallRecord:
    """Everything one call records; filled by the app, written by ``record_call``."""

    rollout_id: str
    run_id: str
    provider_api: str
    model_alias: str
    stream: bool
    position: int
    chain_id: int | None
    parent_chain_id: int | None
    parent_call_id: int | None
    fork_reason: str | None
    prompt_tokens: int
    segment_prompt_ids: list[int]
    sampled_ids: list[int]
    sampled_logprobs: list[float]
    finish_reason: str
    tool_call_count: int
    parse_error: str | None
    policy_version: int
    retemplate_drift: bool | None
    queue_ms: float
    inference_ms: float
    total_ms: float
    ttfb_ms: float | None
    raw_request: Any
    raw_response: Any
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    chain_id: int
    call_id: int
    tokens_key: str


def tokens_key(run_id: str, rollout_id: str, chain_id: int, position: int) -> str:
    return f"tokens/{run_id}/{rollout_id}/{chain_id}/{position}.npz"


def tokens_prefix(run_id: str, rollout_id: str, chain_id: int) -> str:
    return f"tokens/{run_id}/{rollout_id}/{chain_id}/"


def raw_key(run_id: str, rollout_id: str, call_id: int) -> str:
    return f"raw/{run_id}/{rollout_id}/{call_id}.json.zst"


def segment_bytes(
    prompt_ids: list[int], sampled_ids: list[int], logprobs: list[float], version: int
) -> bytes:
    buffer = io.BytesIO()
    np.savez(
        buffer,
        prompt_ids=np.asarray(prompt_ids, dtype=np.int32),
        sampled_ids=np.asarray(sampled_ids, dtype=np.int32),
        sampled_logprobs=np.asarray(logprobs, dtype=np.float32),
        policy_version=np.asarray(version, dtype=np.int64),
    )
    return buffer.getvalue()


def raw_bytes(request: Any, response: Any) -> bytes:
    payload = json.dumps({"request": request, "response": response}, ensure_ascii=False, default=str)
    return zstandard.ZstdCompressor(level=3).compress(payload.encode())


async def record_call(
    sessions: async_sessionmaker[AsyncSession], store: ObjectStore, record: CallRecord
) -> Recorded:
    """Write the call (and its chain when new) in one transaction; see the module docstring."""
    async with async_session_scope(sessions) as session:
        chain_id = record.chain_id
        if chain_id is None:
            chain = Chain(
                rollout_id=record.rollout_id,
                parent_chain_id=record.parent_chain_id,
                fork_reason=record.fork_reason,
                tokens_prefix="",
            )
            session.add(chain)
            await session.flush()
            chain_id = chain.id
            chain.tokens_prefix = tokens_prefix(record.run_id, record.rollout_id, chain_id)
        key = tokens_key(record.run_id, record.rollout_id, chain_id, record.position)
        call = Call(
            rollout_id=record.rollout_id,
            chain_id=chain_id,
            parent_call_id=record.parent_call_id,
            position=record.position,
            fork_reason=record.fork_reason,
            provider_api=record.provider_api,
            model_alias=record.model_alias,
            stream=record.stream,
            prompt_tokens=record.prompt_tokens,
            suffix_tokens=len(record.segment_prompt_ids),
            completion_tokens=len(record.sampled_ids),
            finish_reason=record.finish_reason,
            tool_call_count=record.tool_call_count,
            parse_error=record.parse_error,
            policy_version=record.policy_version,
            retemplate_drift=record.retemplate_drift,
            queue_ms=record.queue_ms,
            inference_ms=record.inference_ms,
            total_ms=record.total_ms,
            ttfb_ms=record.ttfb_ms,
            tokens_key=key,
            notes=record.notes,
        )
        session.add(call)
        await session.flush()
        call.raw_key = raw_key(record.run_id, record.rollout_id, call.id)
        segment = segment_bytes(
            record.segment_prompt_ids, record.sampled_ids, record.sampled_logprobs, record.policy_version
        )
        raw = raw_bytes(record.raw_request, record.raw_response)
        await asyncio.to_thread(_put_objects, store, {key: segment, call.raw_key: raw})
        await session.execute(
            update(Chain)
            .where(Chain.id == chain_id)
            .values(
                n_calls=Chain.n_calls + 1,
                prompt_tokens=Chain.prompt_tokens + len(record.segment_prompt_ids),
                sampled_tokens=Chain.sampled_tokens + len(record.sampled_ids),
            )
        )
        return Recorded(chain_id, call.id, key)


async def record_drift(sessions: async_sessionmaker[AsyncSession], call_id: int, drifted: bool) -> None:
    """Fill ``calls.retemplate_drift`` once the from-scratch render of a recorded call has finished."""
    async with async_session_scope(sessions) as session:
        await session.execute(update(Call).where(Call.id == call_id).values(retemplate_drift=drifted))


def _put_objects(store: ObjectStore, objects: dict[str, bytes]) -> None:
    for key, data in objects.items():
        store.put_bytes(key, data)
