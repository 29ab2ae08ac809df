"""The SFT core (``services/learner/sft.py``) and its config (``shared/run_config.py: SFTConfig``): the loss is the
mean cross-entropy of exactly the loss-mask tokens, equal to a plain forward's by hand, the same through every
reconstruction strategy, blind to the recorded logprobs; it falls on its data; the schedule is a seeded pure
function of the config; the config refuses what it cannot train."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from services.learner import grpo, sft
from services.learner.types import Rollout, TrainingBatch
from shared.run_config import GRPOConfig, RunConfig, SFTConfig
from shared.trajectory import Chain, Segment

pytestmark = pytest.mark.unit


def _two_call_rollout(rid: str, seed: int, logprob: float = -1.0) -> Rollout:
    """One chain of two calls: a prompt, 5 sampled ids, a 3-id tool result, 4 sampled ids."""
    rng = np.random.default_rng(seed)
    calls = tuple(
        Segment.of(
            rng.integers(5, 900, n_suffix), rng.integers(5, 900, n_sampled), np.full(n_sampled, logprob), 0
        )
        for n_suffix, n_sampled in ((7, 5), (3, 4))
    )
    return Rollout(rollout_id=rid, group_id="", reward=1.0, chains=(Chain(rid + "-c", rid, "", calls),))


def _by_hand(model: torch.nn.Module, batch: TrainingBatch) -> float:
    """-mean over every chain's loss-mask positions of log p(id | ids before it), one plain causal forward each."""
    terms = []
    with torch.no_grad():
        for chain in batch.chains:
            ids = torch.from_numpy(chain.ids)[None]
            logits = model(input_ids=ids, use_cache=False).logits[0].double()
            logp = torch.log_softmax(logits, dim=-1)
            for position in np.flatnonzero(chain.loss_mask).tolist():
                terms.append(float(logp[position - 1, int(chain.ids[position])]))
    return -float(np.mean(terms))


def _frozen_step_loss(model: torch.nn.Module, batch: TrainingBatch, strategy: str) -> float:
    """The loss ``sft_step`` reports (before its update), with a zero learning rate so the model is unchanged."""
    config = GRPOConfig(strategy=strategy, learning_rate=1e-12, max_grad_norm=None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    return sft.sft_step(model, optimizer, batch, config)["loss"]


def test_cross_entropy_is_the_mean_over_loss_mask_tokens_by_every_strategy(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float32)
    batch = TrainingBatch([_two_call_rollout("a", 1), _two_call_rollout("b", 2)])
    assert batch.n_loss_tokens == 18  # 2 rollouts x (5 + 4) sampled ids; the 20 prompt ids carry no loss
    expected = _by_hand(model, batch)
    for strategy in ("per_request", "prefix_merging", "trie"):
        assert _frozen_step_loss(model, batch, strategy) == pytest.approx(expected, abs=1e-5), strategy


def test_the_loss_ignores_recorded_logprobs_and_the_prompt_targets(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float32)
    recorded = TrainingBatch([_two_call_rollout("a", 1, logprob=-1.0)])
    other_logprobs = TrainingBatch([_two_call_rollout("a", 1, logprob=-7.5)])
    assert _frozen_step_loss(model, recorded, "trie") == _frozen_step_loss(model, other_logprobs, "trie")
    # Only mask-1 positions are targets: the loss equals the by-hand mean over them, not over every position.
    chain = recorded.chains[0]
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.from_numpy(chain.ids)[None]).logits[0].double(), -1)
    every_position = -float(
        np.mean([float(logp[i - 1, int(chain.ids[i])]) for i in range(1, len(chain.ids))])
    )
    loss = _frozen_step_loss(model, recorded, "trie")
    assert loss == pytest.approx(_by_hand(model, recorded), abs=1e-5)
    assert abs(loss - every_position) > 1e-3


def test_cross_entropy_weights_each_loss_token_equally() -> None:
    objective = sft.CrossEntropy(n_loss_tokens=4)
    logprobs = torch.tensor([-1.0, -2.0, -3.0, -6.0], dtype=torch.float64, requires_grad=True)
    assert objective.loss(logprobs.detach()) == pytest.approx(3.0)
    # Any subset back-propagated alone adds up to the whole: what lets strategies and ranks split a batch.
    half = objective(torch.tensor([0, 1]), logprobs[:2]) + objective(torch.tensor([2, 3]), logprobs[2:])
    assert float(half.detach()) == pytest.approx(3.0)
    half.backward()
    assert logprobs.grad is not None and torch.allclose(
        logprobs.grad, torch.full((4,), -0.25, dtype=torch.float64)
    )


def test_steps_lower_the_loss_on_their_data(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float32)
    batch = TrainingBatch([_two_call_rollout("a", 1), _two_call_rollout("b", 2)])
    config = GRPOConfig(learning_rate=1e-3)
    optimizer = grpo.make_optimizer(model, config)
    losses = [sft.sft_step(model, optimizer, batch, config)["loss"] for _ in range(6)]
    assert losses[-1] < losses[0] - 0.5, losses
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses


def _config(**fields: object) -> SFTConfig:
    return SFTConfig.model_validate(
        {"from_run": "run_x", "rollout_ids": [f"ro{i}" for i in range(10)], **fields}
    )


def test_the_schedule_is_a_seeded_shuffle_per_epoch_covering_every_rollout() -> None:
    config = _config(epochs=3, batch_rollouts=4, seed=5)
    assert config.steps_per_epoch() == 3 and config.steps == 9
    batches = [sft.step_batch(config, step) for step in range(1, config.steps + 1)]
    assert [b.epoch for b in batches] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [len(b.rollout_ids) for b in batches[:3]] == [4, 4, 2]
    for epoch in range(3):
        ids = [r for b in batches if b.epoch == epoch for r in b.rollout_ids]
        assert sorted(ids) == sorted(config.rollout_ids)  # each epoch sees every rollout once
    orders = [[r for b in batches if b.epoch == e for r in b.rollout_ids] for e in range(3)]
    assert orders[0] != orders[1] != orders[2]  # reshuffled per epoch
    assert [
        sft.step_batch(config, s) for s in range(1, 10)
    ] == batches  # a pure function: replay sees the same
    assert sft.step_batch(replace_seed(config, 6), 1) != batches[0]
    with pytest.raises(ValueError, match="outside 1..9"):
        sft.step_batch(config, 10)


def replace_seed(config: SFTConfig, seed: int) -> SFTConfig:
    return config.model_copy(update={"seed": seed})


def test_config_refuses_what_it_cannot_train() -> None:
    with pytest.raises(ValidationError, match="either 'from_run' or 'where'"):
        SFTConfig.model_validate({"rollout_ids": ["ro1"]})
    with pytest.raises(ValidationError, match="either 'from_run' or 'where'"):
        SFTConfig.model_validate({"from_run": "r", "where": "reward >= 1", "rollout_ids": ["ro1"]})
    with pytest.raises(ValidationError, match="'min_reward' filters 'from_run'"):
        SFTConfig.model_validate({"where": "reward >= 1", "min_reward": 1.0, "rollout_ids": ["ro1"]})
    with pytest.raises(ValidationError, match="rollout_ids"):
        SFTConfig.model_validate({"from_run": "r", "rollout_ids": []})
    for bad in ({"epochs": 0}, {"learning_rate": 0.0}, {"batch_rollouts": 0}, {"epochs": "2"}, {"lr": 1e-5}):
        with pytest.raises(ValidationError):
            _config(**bad)
    stored = RunConfig.model_validate(
        {"model": "m", "harness": {"name": "codeblock"}, "sft": _config(epochs=2).model_dump(mode="json")}
    )
    assert stored.sft is not None and stored.sft.steps == 4  # 2 epochs x ceil(10 / 8)


def test_sft_runs_are_their_own_kind() -> None:
    from shared.models import run_kind
    from shared.run_config import EvalTarget

    base = RunConfig(model="m", harness={"name": "codeblock"})  # type: ignore[arg-type]
    assert run_kind(base) == "train"
    assert run_kind(base.model_copy(update={"target": EvalTarget(source="base")})) == "eval"
    assert run_kind(base.model_copy(update={"sft": _config()})) == "sft"


def test_a_teacher_segment_trains_like_a_sampled_one(tiny_policy) -> None:  # type: ignore[no-untyped-def]
    """The loss reads ids and masks only: a chain whose recorded logprobs are all 0 (what a segment without the
    student's logprobs reads as) has the same loss and gradient as the one sampled with real logprobs."""
    sampled = _two_call_rollout("a", 3, logprob=-2.0)
    teacher = replace(sampled, chains=tuple(
        replace(c, calls=tuple(replace(s, sampled_logprobs=np.zeros_like(s.sampled_logprobs)) for s in c.calls))
        for c in sampled.chains
    ))  # fmt: skip
    grads = []
    for rollout in (sampled, teacher):
        model = tiny_policy(torch.float32)
        config = GRPOConfig(learning_rate=1e-12, max_grad_norm=None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        sft.sft_step(model, optimizer, TrainingBatch([rollout]), config)
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    assert torch.equal(grads[0], grads[1])


def test_init_names_a_run_and_optionally_its_version() -> None:
    import click

    from services.cli.run import init_from

    assert init_from("sft_abc") == {"run_id": "sft_abc"}
    assert init_from("sft_abc@6") == {"run_id": "sft_abc", "version": 6}
    for bad in ("@6", "sft_abc@", "sft_abc@six", "sft_abc@-1"):
        with pytest.raises(click.BadParameter, match="RUN or RUN@VERSION"):
            init_from(bad)
    spec = RunConfig.model_validate(
        {"model": "m", "harness": {"name": "codeblock"}, "init": {"run_id": "sft_abc"}}
    )
    assert spec.init is not None and (spec.init.run_id, spec.init.version) == ("sft_abc", None)
    with pytest.raises(ValidationError):
        RunConfig.model_validate({"model": "m", "harness": {"name": "codeblock"}, "init": {"version": 2}})
