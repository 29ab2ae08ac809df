"""Harness-shaped synthetic batches for the benchmark and the tests (no services, seeded, exact lengths).

A group's rollouts share a prefix (system prompt + tool schemas + task); each rollout then alternates a
completion (sampled, loss mask 1) with a tool output (prompt suffix, mask 0). Options add what real harnesses
produce: a fork (a second chain that restarts from the shared prefix plus part of the history, as after a
compaction), a turn cut by ``max_tokens`` (closing tokens with mask 0 open the next suffix), and mixed policy
versions across turns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.learner.types import Rollout, TrainingBatch
from shared.trajectory import Chain, Segment


@dataclass(frozen=True, kw_only=True)
class WorkloadShape:
    groups: int = 1
    group_size: int = 8
    turns: int = 10
    prefix_tokens: int = 4096
    tool_tokens: int = 300
    completion_tokens: int = 150
    vocab_size: int = 4096
    fork_every: int = 0  # every n-th rollout also has a forked chain (0: none)
    truncate_every: int = 0  # every n-th turn is cut by max_tokens (0: none)
    versions: int = 1  # policy versions spread over the turns
    close_ids: tuple[int, ...] = (4089, 198)  # what the template appends after a cut turn


def _ids(rng: np.random.Generator, n: int, vocab: int) -> np.ndarray:
    return rng.integers(0, vocab - 16, size=n, dtype=np.int64)


def _logprobs(rng: np.random.Generator, n: int) -> np.ndarray:
    return -rng.exponential(2.0, size=n).astype(np.float32)


def harness_batch(shape: WorkloadShape, seed: int = 0, base_version: int = 0) -> TrainingBatch:
    rng = np.random.default_rng(seed)
    rollouts: list[Rollout] = []
    for g in range(shape.groups):
        group_id = f"g{g}"
        prefix = _ids(rng, shape.prefix_tokens, shape.vocab_size)
        for i in range(shape.group_size):
            rollout_id = f"{group_id}r{i}"
            calls: list[Segment] = []
            pending_close = False
            for turn in range(shape.turns):
                if turn == 0:
                    suffix = prefix
                else:
                    suffix = _ids(rng, shape.tool_tokens, shape.vocab_size)
                    if pending_close:
                        suffix = np.concatenate([np.asarray(shape.close_ids, np.int64), suffix])
                truncated = bool(shape.truncate_every) and (turn + 1) % shape.truncate_every == 0
                pending_close = truncated
                version = base_version + (turn * shape.versions) // max(shape.turns, 1)
                calls.append(
                    Segment(
                        suffix_ids=suffix,
                        sampled_ids=_ids(rng, shape.completion_tokens, shape.vocab_size),
                        sampled_logprobs=_logprobs(rng, shape.completion_tokens),
                        policy_version=version,
                    )
                )
            chains = [Chain(f"{rollout_id}c0", rollout_id, group_id, tuple(calls))]
            if shape.fork_every and i % shape.fork_every == 0 and len(calls) > 1:
                # A compaction: restart from the shared prefix + the first turn's history, new continuation.
                kept = calls[0]
                restart = np.concatenate([kept.suffix_ids, kept.sampled_ids, _ids(rng, 40, shape.vocab_size)])
                fork_calls = (
                    Segment(
                        suffix_ids=restart,
                        sampled_ids=_ids(rng, shape.completion_tokens, shape.vocab_size),
                        sampled_logprobs=_logprobs(rng, shape.completion_tokens),
                        policy_version=calls[-1].policy_version,
                    ),
                )
                chains.append(Chain(f"{rollout_id}c1", rollout_id, group_id, fork_calls))
            reward = float(rng.random())
            rollouts.append(
                Rollout(rollout_id=rollout_id, group_id=group_id, reward=reward, chains=tuple(chains))
            )
    return TrainingBatch(rollouts)
