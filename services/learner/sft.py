"""The SFT core, top to bottom: which rollouts each step trains, the cross-entropy objective, one update.

Read in order: ``SFTConfig`` (``shared/run_config.py``: the data, epochs, batch size, learning rate, seed) →
``epoch_order`` / ``step_batch`` (the schedule) → ``CrossEntropy`` (the per-token loss every reconstruction
strategy back-propagates) → ``sft_step``. The run's process around it is ``sft_loop.py``.

The loss over a batch of recorded chains, with N the batch's loss tokens (loss mask 1: the ids the policy or a
teacher produced; prompt suffixes — system prompt, task, tool results, template glue — are mask 0)::

    L = -(1/N) * sum_t log p(x_t | x_<t)

It is a fixed weighted sum of per-token terms (each weight 1/N, known before any forward pass), like the GRPO
loss (``grpo.py``), so it runs through the same ``reconstruct.compute``: the same chains, masks and trie packing,
where a prefix the batch's rollouts share is computed once, and a strategy may back-propagate any subset of the
tokens on its own. It reads only token ids and loss masks — never the logprobs recorded at sampling — so a
segment a teacher produced (no logprobs of the student's) trains the same way.

The schedule is a pure function of the config: step ``s`` (1-based) is batch ``(s - 1) % steps_per_epoch`` of
epoch ``(s - 1) // steps_per_epoch``, whose order is a permutation of ``rollout_ids`` seeded by ``(seed,
epoch)``. A restarted learner therefore replays the steps after its checkpoint on exactly the same batches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from services.learner import reconstruct
from services.learner.grpo import apply_update
from services.learner.memory import PeakMemory
from services.learner.types import TrainingBatch
from shared.run_config import GRPOConfig, SFTConfig

# --- the schedule ----------------------------------------------------------------------------------------------


def epoch_order(rollout_ids: list[str], seed: int, epoch: int) -> list[str]:
    """The rollouts of ``epoch`` in their seeded shuffled order."""
    permutation = np.random.default_rng([seed, epoch]).permutation(len(rollout_ids))
    return [rollout_ids[i] for i in permutation.tolist()]


@dataclass(frozen=True, kw_only=True)
class StepBatch:
    step: int
    epoch: int
    rollout_ids: list[str]


def step_batch(config: SFTConfig, step: int) -> StepBatch:
    """The rollouts step ``step`` (1 .. ``config.steps``) trains on (module docstring)."""
    if not 1 <= step <= config.steps:
        raise ValueError(f"step {step} is outside 1..{config.steps}")
    per_epoch = config.steps_per_epoch()
    epoch, index = divmod(step - 1, per_epoch)
    order = epoch_order(config.rollout_ids, config.seed, epoch)
    start = index * config.batch_rollouts
    return StepBatch(step=step, epoch=epoch, rollout_ids=order[start : start + config.batch_rollouts])


# --- the loss --------------------------------------------------------------------------------------------------


class CrossEntropy:
    """``token_loss(index, logprobs)`` for ``reconstruct.compute``: each loss token's ``-logp / N``."""

    def __init__(self, n_loss_tokens: int) -> None:
        self.weight = 1.0 / max(n_loss_tokens, 1)

    def __call__(self, index: torch.Tensor, logprobs: torch.Tensor) -> torch.Tensor:
        return -logprobs.double().sum() * self.weight

    def loss(self, logprobs: torch.Tensor) -> float:
        """The batch's loss from every loss token's logprob (canonical order, detached)."""
        return float(-logprobs.double().sum() * self.weight) if len(logprobs) else 0.0


# --- one update ------------------------------------------------------------------------------------------------


def optimizer_config(grpo_config: GRPOConfig, sft: SFTConfig) -> GRPOConfig:
    """The run's optimizer and reconstruction knobs (its ``grpo`` section) with the SFT learning rate and seed."""
    return grpo_config.model_copy(update={"learning_rate": sft.learning_rate, "seed": sft.seed})


def sft_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: TrainingBatch,
    config: GRPOConfig,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> dict[str, float]:
    """One cross-entropy update on ``batch``: forward+backward by ``config.strategy``, clip, step. Returns the
    step's figures; ``loss`` is the batch's mean cross-entropy before the update."""
    with PeakMemory(next(model.parameters()).device) as memory:
        started = time.perf_counter()
        objective = CrossEntropy(batch.n_loss_tokens)
        out, logprobs, tokens, grad_norm = apply_update(
            model, optimizer, batch, objective, config, rank=rank, world_size=world_size
        )
        rewards = np.asarray([r.reward for r in batch.rollouts], np.float64)
        metrics = {
            "loss": objective.loss(logprobs),
            "grad_norm": grad_norm,
            "reward_mean": float(rewards.mean()) if len(rewards) else 0.0,
            "reward_std": float(rewards.std()) if len(rewards) else 0.0,
            "loss_tokens": float(batch.n_loss_tokens),
            "tokens_computed": float(tokens),
            "tokens_lower_bound": float(reconstruct.trie_lower_bound(batch)),
            "plan_s": out.plan_s,
            "step_time_s": time.perf_counter() - started,
        }
    metrics.update(peak_memory_bytes=memory.peak, peak_memory_step_bytes=memory.above_start)
    return metrics
