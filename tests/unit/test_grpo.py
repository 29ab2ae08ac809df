"""The GRPO core: advantages, aggregation weights, the clipped/truncated loss, and learning a toy reward."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from services.learner import grpo
from services.learner.types import Rollout, TrainingBatch
from shared.trajectory import Chain, Segment

pytestmark = pytest.mark.unit


def _rollout(rid: str, group: str, reward: float, n_sampled: int, behavior: float = -1.0) -> Rollout:
    call = Segment(
        suffix_ids=np.arange(4, dtype=np.int64),
        sampled_ids=np.arange(10, 10 + n_sampled, dtype=np.int64),
        sampled_logprobs=np.full(n_sampled, behavior, np.float32),
        policy_version=0,
    )
    return Rollout(
        rollout_id=rid, group_id=group, reward=reward, chains=(Chain(rid + "c", rid, group, (call,)),)
    )


def test_mean_and_leave_one_out_baselines() -> None:
    rewards = [1.0, 0.0, 0.0, 1.0]
    mean = grpo.group_advantages(rewards, grpo.GRPOConfig(baseline="mean"))
    assert mean == pytest.approx([0.5, -0.5, -0.5, 0.5])
    loo = grpo.group_advantages(rewards, grpo.GRPOConfig(baseline="leave_one_out"))
    # r_i - mean(others): 1 - 1/3, 0 - 2/3
    assert loo == pytest.approx([2 / 3, -2 / 3, -2 / 3, 2 / 3])
    normalized = grpo.group_advantages(rewards, grpo.GRPOConfig(normalize_std=True))
    assert normalized == pytest.approx([1.0, -1.0, -1.0, 1.0], rel=1e-5)
    assert grpo.group_advantages([0.3], grpo.GRPOConfig()) == [0.0]


def test_advantages_are_computed_within_each_group() -> None:
    rollouts = [
        _rollout("a", "g1", 1.0, 3),
        _rollout("b", "g1", 0.0, 3),
        _rollout("c", "g2", 5.0, 3),
        _rollout("d", "g2", 7.0, 3),
    ]
    out = grpo.with_advantages(rollouts, grpo.GRPOConfig())
    assert [r.advantage for r in out] == pytest.approx([0.5, -0.5, -1.0, 1.0])


def test_overlong_penalty_charges_rollouts_cut_by_the_token_limit() -> None:
    from dataclasses import replace

    right, right_cut, wrong, wrong_cut = (
        replace(_rollout(rid, "g", reward, 3), calls_cut=cut)
        for rid, reward, cut in (("a", 1.0, 0), ("b", 1.0, 2), ("c", 0.0, 0), ("d", 0.0, 1))
    )
    group = [right, right_cut, wrong, wrong_cut]
    off = grpo.with_advantages(group, grpo.GRPOConfig())
    assert [r.advantage for r in off] == pytest.approx([0.5, 0.5, -0.5, -0.5])
    config = grpo.GRPOConfig(overlong_penalty=0.5)
    # Only what a cut rollout earned is charged: a wrong answer stays at 0, cut or not.
    assert [grpo.training_reward(r, config) for r in group] == [1.0, 0.5, 0.0, 0.0]
    on = grpo.with_advantages(group, config)
    # Training rewards 1, 0.5, 0, 0 (mean 0.375): a right answer that stopped beats one the limit cut.
    assert [r.advantage for r in on] == pytest.approx([0.625, 0.125, -0.375, -0.375])
    assert [r.reward for r in on] == [1.0, 1.0, 0.0, 0.0]  # the task's reward is kept as it was
    # Never below 0: a penalty larger than the reward takes the reward, no more.
    big = grpo.GRPOConfig(overlong_penalty=3.0)
    assert [grpo.training_reward(r, big) for r in group] == [1.0, 0.0, 0.0, 0.0]
    partial = replace(_rollout("e", "g", 0.3, 3), calls_cut=1)
    assert grpo.training_reward(partial, config) == 0.0
    assert grpo.training_reward(replace(partial, reward=-1.0), config) == -1.0
    with pytest.raises(ValueError):
        grpo.GRPOConfig(overlong_penalty=-1.0)


def test_token_and_sequence_aggregation_weights() -> None:
    batch = TrainingBatch([_rollout("a", "g", 1.0, 2), _rollout("b", "g", 0.0, 6)])
    token = grpo.token_weights(batch, grpo.GRPOConfig(aggregation="token"))
    assert token == pytest.approx([1 / 8] * 8)
    sequence = grpo.token_weights(batch, grpo.GRPOConfig(aggregation="sequence"))
    # Each rollout weighs 1/2, spread over its own tokens: the short rollout's tokens weigh 3x more.
    assert sequence == pytest.approx([1 / 4] * 2 + [1 / 12] * 6)
    assert sequence.sum() == pytest.approx(1.0)


def _objective(config: grpo.GRPOConfig, advantage: float, behavior: float, reference=None):  # type: ignore[no-untyped-def]
    batch = TrainingBatch([_rollout("a", "g", 0.0, 1, behavior)])
    batch = TrainingBatch(
        [
            Rollout(
                rollout_id=r.rollout_id,
                group_id=r.group_id,
                reward=r.reward,
                chains=r.chains,
                advantage=advantage,
            )
            for r in batch.rollouts
        ]
    )
    return grpo.TokenObjective(batch, config, torch.device("cpu"), reference)


def _grad(objective: grpo.TokenObjective, logprob: float) -> float:
    lp = torch.tensor([logprob], dtype=torch.float64, requires_grad=True)
    objective(torch.tensor([0]), lp).backward()
    return float(lp.grad[0])  # type: ignore[index]


def test_ppo_clip_stops_gradient_outside_the_trust_region() -> None:
    config = grpo.GRPOConfig(clip_low=0.2, clip_high=0.28, tis_cap=None)
    # ratio 1: plain policy gradient, d(-ratio*A)/dlogp = -A
    assert _grad(_objective(config, 1.0, -1.0), -1.0) == pytest.approx(-1.0)
    # positive advantage, ratio 1.5 > 1.28: clipped, no gradient
    assert _grad(_objective(config, 1.0, -1.0), -1.0 + np.log(1.5)) == 0.0
    # ratio 1.25 < 1.28 (clip-higher leaves room): still pushed up
    assert _grad(_objective(config, 1.0, -1.0), -1.0 + np.log(1.25)) == pytest.approx(-1.25)
    # negative advantage, ratio 0.5 < 0.8: clipped
    assert _grad(_objective(config, -1.0, -1.0), -1.0 + np.log(0.5)) == 0.0


def test_truncated_importance_sampling_caps_the_weight() -> None:
    capped = grpo.GRPOConfig(tis_cap=2.0)
    uncapped = grpo.GRPOConfig(tis_cap=None)
    # Negative advantage, ratio e^3 ≈ 20: unclipped by PPO; TIS caps its weight at 2.
    logprob = -1.0 + 3.0
    assert _grad(_objective(uncapped, -1.0, -1.0), logprob) == pytest.approx(np.exp(3.0))
    assert _grad(_objective(capped, -1.0, -1.0), logprob) == pytest.approx(2.0)
    metrics = _objective(capped, -1.0, -1.0).metrics(torch.tensor([logprob], dtype=torch.float64))
    assert metrics["tis_fraction"] == 1.0


def test_kl_to_reference_is_zero_at_the_reference_and_pulls_back() -> None:
    config = grpo.GRPOConfig(kl_coef=0.5, tis_cap=None)
    reference = torch.tensor([-2.0], dtype=torch.float64)
    at_reference = _objective(config, 0.0, -2.0, reference)
    assert _grad(at_reference, -2.0) == pytest.approx(0.0)
    above = _objective(config, 0.0, -1.0, reference)
    assert _grad(above, -1.0) > 0  # loss grows with logp above the reference: gradient descent pulls it down
    assert above.metrics(torch.tensor([-1.0], dtype=torch.float64))["kl"] > 0


def test_config_refuses_unknown_and_bad_settings() -> None:
    with pytest.raises(ValueError, match="learning_rat\n.*Extra inputs are not permitted"):
        grpo.GRPOConfig.model_validate({"learning_rat": 1e-3})
    with pytest.raises(ValueError, match="aggregation"):
        grpo.GRPOConfig.model_validate({"aggregation": "rollout"})
    with pytest.raises(ValueError, match="strategy"):
        grpo.GRPOConfig.model_validate({"strategy": "dense"})
    assert grpo.GRPOConfig.model_validate({"learning_rate": 0.01}).learning_rate == 0.01


# --- learning a toy reward -----------------------------------------------------------------------------------

TARGET = np.arange(0, 4096, 8)  # 512 of 4096 ids: a random policy lands in it ~1/8 of the time


@torch.no_grad()
def _sample(model, prompt: torch.Tensor, n: int, max_new: int, generator: torch.Generator):  # type: ignore[no-untyped-def]
    """Plain ancestral sampling (temperature 1) with a KV cache; returns ids and their logprobs."""
    ids = prompt[None].repeat(n, 1)
    out = model(input_ids=ids, use_cache=True, attention_mask={"full_attention": None})
    sampled, logprobs = [], []
    for _ in range(max_new):
        logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        token = torch.multinomial(logp.exp(), 1, generator=generator)
        sampled.append(token[:, 0])
        logprobs.append(logp.gather(-1, token)[:, 0])
        out = model(
            input_ids=token,
            past_key_values=out.past_key_values,
            use_cache=True,
            attention_mask={"full_attention": None},
        )
    return torch.stack(sampled, 1).numpy(), torch.stack(logprobs, 1).numpy()


@pytest.mark.slow
def test_mean_reward_rises_on_a_toy_reward(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = tiny_policy(torch.float32)
    config = grpo.GRPOConfig(learning_rate=1e-2, max_grad_norm=1.0, strategy="trie")
    optimizer = grpo.make_optimizer(model, config)
    prompts = [torch.randint(0, 4000, (12,), generator=generator) for _ in range(2)]
    history = []
    for step in range(20):
        rollouts = []
        for g, prompt in enumerate(prompts):
            model.eval()
            sampled, logprobs = _sample(model, prompt, 8, 16, generator)
            model.train()
            for i in range(8):
                reward = float(np.isin(sampled[i], TARGET).mean())
                call = Segment(
                    prompt.numpy().astype(np.int64), sampled[i].astype(np.int64), logprobs[i], step
                )
                rid = f"s{step}g{g}r{i}"
                rollouts.append(
                    Rollout(
                        rollout_id=rid,
                        group_id=f"s{step}g{g}",
                        reward=reward,
                        chains=(Chain(rid, rid, f"s{step}g{g}", (call,)),),
                    )
                )
        batch = TrainingBatch(grpo.with_advantages(rollouts, config))
        result = grpo.grpo_step(model, optimizer, batch, config)
        history.append(result.metrics["reward_mean"])
        # Freshly sampled data is on-policy: the learner's logprobs match the sampler's.
        assert result.metrics["kl_behavior"] < 1e-4
    first, last = np.mean(history[:5]), np.mean(history[-5:])
    print("reward history", [round(h, 3) for h in history])
    assert first < 0.2
    assert last > first + 0.5, history
    assert time.monotonic() - started < 120


def test_a_teachers_tokens_are_refused_not_trained_on_fake_logprobs() -> None:
    """A teacher's segment has NaN behaviour logprobs (``shared/trajectory.py``); GRPO's objective refuses it."""
    teacher = Segment.of_teacher(np.arange(4), np.arange(10, 13), 0)
    rollouts = [
        Rollout(rollout_id="t", group_id="g", reward=1.0, chains=(Chain("tc", "t", "g", (teacher,)),)),
        _rollout("p", "g", 0.0, 3),
    ]
    batch = TrainingBatch(grpo.with_advantages(rollouts, grpo.GRPOConfig()))
    with pytest.raises(grpo.NoBehaviorLogprobs, match="teacher"):
        grpo.TokenObjective(batch, grpo.GRPOConfig(), torch.device("cpu"))
