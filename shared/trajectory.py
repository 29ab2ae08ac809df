"""Reading a chain's token sequence back from the gateway's per-call segments (used by the learner and API).

The gateway stores one segment per call (``tokens/<run>/<rollout>/<chain>/<position>.npz``; see
``services/gateway/capture.py``): the prompt ids new to the chain, the sampled ids, their logprobs and the policy
version. Concatenating the segments in position order gives exactly the ids the model saw and sampled — the splice
guarantees every call's prompt is the previous prompt + the previous sampled ids + the new suffix.

``load_chain_tokens(store, calls)`` takes the chain's ``calls`` rows (any objects with ``position`` and
``tokens_key``, e.g. ``shared.models.Call``), checks the positions are 0..n-1, and returns four aligned arrays:
``ids`` (int64), ``loss_mask`` (int8: 1 on sampled tokens, 0 on prompt tokens), ``behavior_logprobs`` (float32:
the sampling logprob on sampled tokens, 0.0 elsewhere) and ``versions`` (int64: the policy version that sampled a
token, -1 on prompt tokens).
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Protocol

import numpy as np

from shared.objectstore import ObjectStore


class ChainCall(Protocol):
    position: int
    tokens_key: str


class TrajectoryError(ValueError):
    """The recorded calls do not form one complete chain."""


def load_segment(store: ObjectStore, key: str) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(store.get_bytes(key))) as data:
        return {name: data[name] for name in data.files}


def load_chain_tokens(
    store: ObjectStore, calls: Iterable[ChainCall]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, loss_mask, behavior_logprobs, versions)`` of one chain, from its calls' token segments."""
    ordered = sorted(calls, key=lambda call: call.position)
    if [call.position for call in ordered] != list(range(len(ordered))):
        raise TrajectoryError(
            f"chain positions must be 0..n-1 without gaps, got {[c.position for c in ordered]}"
        )
    ids: list[np.ndarray] = []
    mask: list[np.ndarray] = []
    logprobs: list[np.ndarray] = []
    versions: list[np.ndarray] = []
    for call in ordered:
        segment = load_segment(store, call.tokens_key)
        prompt, sampled = segment["prompt_ids"], segment["sampled_ids"]
        version = int(segment["policy_version"])
        ids += [prompt.astype(np.int64), sampled.astype(np.int64)]
        mask += [np.zeros(len(prompt), np.int8), np.ones(len(sampled), np.int8)]
        logprobs += [np.zeros(len(prompt), np.float32), segment["sampled_logprobs"].astype(np.float32)]
        versions += [np.full(len(prompt), -1, np.int64), np.full(len(sampled), version, np.int64)]
    if not ordered:
        empty = np.zeros(0, np.int64)
        return empty, np.zeros(0, np.int8), np.zeros(0, np.float32), empty.copy()
    return np.concatenate(ids), np.concatenate(mask), np.concatenate(logprobs), np.concatenate(versions)


def call_prompt_length(store: ObjectStore, calls: Iterable[ChainCall], position: int) -> int:
    """How many ids of the chain sequence form the prompt of the call at ``position``."""
    total = 0
    for call in sorted(calls, key=lambda c: c.position):
        segment = load_segment(store, call.tokens_key)
        total += len(segment["prompt_ids"])
        if call.position == position:
            return total
        total += len(segment["sampled_ids"])
    raise TrajectoryError(f"no call at position {position}")
