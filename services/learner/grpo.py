"""The GRPO core, top to bottom: knobs, group advantages, per-token weights, the clipped loss, one update.

Read in order (CleanRL style): ``GRPOConfig`` (every knob, documented; it is the ``grpo`` section of a run's config
and lives in ``shared/run_config.py``, so the REST API, the CLI and this file share one definition) →
``training_reward`` → ``group_advantages`` → ``token_weights`` → ``TokenObjective`` (the per-token loss every reconstruction strategy
back-propagates) → ``grpo_step``.

The loss is a fixed weighted sum of per-token terms, ``L = sum_t w_t * l_t(logp_t)``: weights come from the
aggregation rule and are computed from the batch *before* any forward pass, so a strategy (or a data-parallel
rank) may back-propagate any subset of tokens on its own and the gradients add up to exactly the batch's.

Per loss token ``t`` of rollout ``i`` (advantage ``A_i``), with ``logp`` the learner's logprob and ``b`` the
behavior logprob recorded by the inference service when it sampled the token:

    ratio   = exp(logp - b)                                  (importance ratio vs the sampling policy)
    surr    = min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A)        (PPO clip, clip-higher)
    tis     = min(1, tis_cap / ratio)   detached             (truncated IS: the effective weight is min(ratio, cap))
    kl      = exp(r - logp) - (r - logp) - 1                 (k3 estimator vs a reference model's logprob r)
    l_t     = -tis * surr + kl_coef * kl

Truncated importance sampling matters for off-policy tokens (sampled by an older policy version, or with a
numerically different inference engine): a token whose ratio explodes with a negative advantage would otherwise
dominate the gradient; capping at ``tis_cap`` bounds its weight while keeping the gradient direction.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from services.learner import reconstruct
from services.learner.memory import PeakMemory
from services.learner.types import Rollout, TrainingBatch
from shared.run_config import GRPOConfig

# --- advantages ------------------------------------------------------------------------------------------------


def group_advantages(rewards: list[float], config: GRPOConfig) -> list[float]:
    """Group-relative advantages of one GRPO group's rewards."""
    r = np.asarray(rewards, np.float64)
    n = len(r)
    if n < 2:
        return [0.0] * n
    if config.baseline == "leave_one_out":
        advantage = r - (r.sum() - r) / (n - 1)
    else:
        advantage = r - r.mean()
    if config.normalize_std:
        advantage = advantage / (r.std() + config.std_epsilon)
    return advantage.tolist()


def training_reward(rollout: Rollout, config: GRPOConfig) -> float:
    """The reward the advantage is computed from: the task's, less ``overlong_penalty`` if the token limit cut
    any of the rollout's calls — taken from what the rollout earned, never below 0, so cut answers that earned
    nothing stay level with short ones that earned nothing (the ``rewards`` row and the reported reward stay
    the task's)."""
    if not rollout.calls_cut or rollout.reward <= 0:
        return rollout.reward
    return rollout.reward - min(config.overlong_penalty, rollout.reward)


def with_advantages(rollouts: list[Rollout], config: GRPOConfig) -> list[Rollout]:
    """Each rollout with its advantage computed within its group (rollouts grouped by ``group_id``)."""
    by_group: dict[str, list[int]] = {}
    for index, rollout in enumerate(rollouts):
        by_group.setdefault(rollout.group_id, []).append(index)
    out = list(rollouts)
    for members in by_group.values():
        advantages = group_advantages([training_reward(rollouts[i], config) for i in members], config)
        for i, a in zip(members, advantages, strict=True):
            out[i] = replace(rollouts[i], advantage=a)
    return out


# --- per-token weights ---------------------------------------------------------------------------------------


def token_weights(batch: TrainingBatch, config: GRPOConfig) -> np.ndarray:
    """w_t of each loss token (canonical order) so that L = sum_t w_t * l_t implements the aggregation."""
    per_token = batch.per_loss_token()
    n = batch.n_loss_tokens
    if n == 0:
        return np.zeros(0)
    if config.aggregation == "token":
        return np.full(n, 1.0 / n)
    rollout_index = per_token["rollout_index"]
    counts = np.bincount(rollout_index, minlength=len(batch.rollouts)).astype(np.float64)
    trained = int((counts > 0).sum())
    return 1.0 / (counts[rollout_index] * trained)


# --- the loss --------------------------------------------------------------------------------------------------


class NoBehaviorLogprobs(ValueError):
    """A loss token without a behaviour logprob: a teacher's reply (``shared/trajectory.py``), which no policy
    sampled. GRPO's ratio needs ``b``; the loader sets such groups aside before they get here."""


class TokenObjective:
    """``l_t`` of the module docstring, weighted; called by reconstruction with any subset of loss tokens."""

    def __init__(
        self,
        batch: TrainingBatch,
        config: GRPOConfig,
        device: torch.device,
        reference_logprobs: torch.Tensor | None = None,
    ) -> None:
        per_token = batch.per_loss_token()
        if np.isnan(per_token["behavior_logprobs"]).any():
            raise NoBehaviorLogprobs(
                "the batch holds a teacher's tokens (no behaviour logprobs); GRPO trains only on the policy's"
            )
        self.config = config
        self.advantage = torch.from_numpy(per_token["advantage"]).to(device)
        self.behavior = torch.from_numpy(per_token["behavior_logprobs"]).to(device)
        self.weight = torch.from_numpy(token_weights(batch, config)).to(device)
        self.reference = reference_logprobs

    def __call__(self, index: torch.Tensor, logprobs: torch.Tensor) -> torch.Tensor:
        c = self.config
        logprobs = logprobs.double()
        advantage = self.advantage[index]
        ratio = torch.exp(logprobs - self.behavior[index])
        clipped = torch.clamp(ratio, 1.0 - c.clip_low, 1.0 + c.clip_high)
        surrogate = torch.minimum(ratio * advantage, clipped * advantage)
        if c.tis_cap is not None:
            surrogate = surrogate * torch.clamp(c.tis_cap / ratio.detach(), max=1.0)
        loss = -surrogate
        if c.kl_coef and self.reference is not None:
            delta = self.reference[index] - logprobs
            loss = loss + c.kl_coef * (torch.exp(delta) - delta - 1.0)
        return (loss * self.weight[index]).sum()

    def metrics(self, logprobs: torch.Tensor) -> dict[str, float]:
        """Loss, clip fraction, KLs over all loss tokens (``logprobs`` detached, canonical order)."""
        c = self.config
        if len(logprobs) == 0:
            return {"loss": 0.0, "clip_fraction": 0.0, "kl_behavior": 0.0, "kl": 0.0, "tis_fraction": 0.0}
        index = torch.arange(len(logprobs), device=logprobs.device)
        with torch.no_grad():
            loss = float(self(index, logprobs))
            ratio = torch.exp(logprobs.double() - self.behavior)
            clipped = ((ratio < 1 - c.clip_low) & (self.advantage < 0)) | (
                (ratio > 1 + c.clip_high) & (self.advantage > 0)
            )
            log_ratio = self.behavior - logprobs.double()
            kl_behavior = float((torch.exp(log_ratio) - log_ratio - 1).mean())
            kl = 0.0
            if self.reference is not None:
                delta = self.reference - logprobs.double()
                kl = float((torch.exp(delta) - delta - 1).mean())
            tis = float((ratio > c.tis_cap).double().mean()) if c.tis_cap is not None else 0.0
        return {
            "loss": loss,
            "clip_fraction": float(clipped.double().mean()),
            "kl_behavior": kl_behavior,
            "kl": kl,
            "tis_fraction": tis,
        }


# --- one update ------------------------------------------------------------------------------------------------


def make_optimizer(model: torch.nn.Module, config: GRPOConfig) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters (all of them, or a LoRA adapter's)."""
    return torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad],
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
        weight_decay=config.weight_decay,
    )


def all_reduce_gradients(model: torch.nn.Module) -> None:
    """Sum gradients over data-parallel ranks (each rank back-propagated its own tokens of the same loss)."""
    import torch.distributed as dist

    for p in model.parameters():
        if not p.requires_grad:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)


def apply_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: TrainingBatch,
    objective: reconstruct.TokenLoss,
    config: GRPOConfig,
    *,
    rank: int,
    world_size: int,
) -> tuple[reconstruct.StrategyOutput, torch.Tensor, int, float]:
    """One update of ``model`` by ``objective`` over ``batch``: the forward and backward passes of
    ``config.strategy``, then the sums over data-parallel ranks (a replicated model's gradients; every rank's
    loss-token logprobs and token counts), clipping by global norm, the optimizer step. Returns the strategy's
    output, the batch's loss-token logprobs, the tokens computed and the gradient norm (0.0 without clipping). The
    GRPO step and the SFT step (``sft.py``, a cross-entropy objective) both update through it."""
    device = next(model.parameters()).device
    optimizer.zero_grad(set_to_none=True)
    out = reconstruct.compute(
        model,
        batch,
        config.strategy,
        objective,
        max_pack_tokens=config.max_pack_tokens,
        rank=rank,
        world_size=world_size,
        bf16_autocast=reconstruct.resolve_bf16(config.bf16_autocast, device),
        trie_attention=config.trie_attention,
    )
    logprobs, tokens = out.logprobs, out.tokens_computed
    if world_size > 1:
        import torch.distributed as dist

        if not reconstruct.is_sharded(model):
            all_reduce_gradients(model)
        dist.all_reduce(logprobs, op=dist.ReduceOp.SUM)  # each loss token was computed by exactly one rank
        counted = torch.tensor([tokens], dtype=torch.int64)
        dist.all_reduce(counted, op=dist.ReduceOp.SUM)
        tokens = int(counted.item())
    grad_norm = float("nan")
    if config.max_grad_norm is not None:
        norm = torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.requires_grad], config.max_grad_norm
        )
        grad_norm = float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)
    optimizer.step()
    return out, logprobs, tokens, grad_norm if math.isfinite(grad_norm) else 0.0


@dataclass
class StepResult:
    metrics: dict[str, float]
    logprobs: torch.Tensor
    tokens_computed: int


def grpo_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: TrainingBatch,
    config: GRPOConfig,
    reference_model: torch.nn.Module | None = None,
    *,
    rank: int = 0,
    world_size: int = 1,
) -> StepResult:
    """One GRPO update on ``batch`` (advantages already set): forward+backward by strategy, clip, step.

    ``model`` may be sharded (FSDP2, ``distributed.shard_model``): then gradients arrive reduce-scattered and only
    the logprobs and token counts are summed here; a replicated model's gradients are all-reduced here."""
    with PeakMemory(next(model.parameters()).device) as memory:
        result = _grpo_step(model, optimizer, batch, config, reference_model, rank, world_size)
    result.metrics.update(peak_memory_bytes=memory.peak, peak_memory_step_bytes=memory.above_start)
    return result


def _grpo_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: TrainingBatch,
    config: GRPOConfig,
    reference_model: torch.nn.Module | None,
    rank: int,
    world_size: int,
) -> StepResult:
    started = time.perf_counter()
    device = next(model.parameters()).device
    reference = None
    if reference_model is not None and config.kl_coef:
        ref_out = reconstruct.compute(
            reference_model,
            batch,
            config.strategy,
            None,
            max_pack_tokens=config.max_pack_tokens,
            rank=rank,
            world_size=world_size,
            trie_attention=config.trie_attention,
        )
        reference = ref_out.logprobs
        if world_size > 1:
            import torch.distributed as dist

            dist.all_reduce(
                reference, op=dist.ReduceOp.SUM
            )  # each loss token was computed by exactly one rank
    objective = TokenObjective(batch, config, device, reference)
    out, logprobs, tokens, grad_norm = apply_update(
        model, optimizer, batch, objective, config, rank=rank, world_size=world_size
    )
    metrics = objective.metrics(logprobs)
    rewards = np.asarray([r.reward for r in batch.rollouts], np.float64)
    metrics.update(
        grad_norm=grad_norm,
        reward_mean=float(rewards.mean()) if len(rewards) else 0.0,
        reward_std=float(rewards.std()) if len(rewards) else 0.0,
        loss_tokens=float(batch.n_loss_tokens),
        tokens_computed=float(tokens),
        tokens_lower_bound=float(reconstruct.trie_lower_bound(batch)),
        plan_s=out.plan_s,
        step_time_s=time.perf_counter() - started,
    )
    return StepResult(metrics, logprobs, tokens)
