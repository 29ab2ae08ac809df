"""The three reconstruction strategies give the same loss-token logprobs, loss and gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from services.learner import grpo, reconstruct
from services.learner.synthetic import WorkloadShape, harness_batch
from services.learner.types import TrainingBatch

pytestmark = pytest.mark.unit


def _gradients(model: torch.nn.Module, batch: TrainingBatch, strategy: str, **kw: object):  # type: ignore[no-untyped-def]
    config = grpo.GRPOConfig(aggregation="sequence", kl_coef=0.0)
    batch = TrainingBatch(grpo.with_advantages(batch.rollouts, config))
    objective = grpo.TokenObjective(batch, config, torch.device("cpu"))
    model.zero_grad(set_to_none=True)
    out = reconstruct.compute(model, batch, strategy, objective, **kw)  # type: ignore[arg-type]
    loss = objective(torch.arange(batch.n_loss_tokens), out.logprobs)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, float(loss), grads


def _assert_same(reference, other, rtol: float) -> None:  # type: ignore[no-untyped-def]
    (out_a, loss_a, grads_a), (out_b, loss_b, grads_b) = reference, other
    assert out_b.computed.all()
    assert torch.allclose(out_a.logprobs, out_b.logprobs, rtol=rtol, atol=rtol)
    assert loss_b == pytest.approx(loss_a, rel=rtol, abs=rtol)
    assert grads_a.keys() == grads_b.keys() and len(grads_a) > 10
    for name, grad in grads_a.items():
        scale = float(grad.abs().max())
        assert scale > 0, name
        assert float((grad - grads_b[name]).abs().max()) <= rtol * scale, name


# fp64 is not fully fp64: transformers' RMSNorm computes in fp32, which bounds agreement near 1e-8 relative.
@pytest.mark.parametrize("dtype, rtol", [(torch.float64, 2e-7), (torch.float32, 2e-5)])
def test_strategies_agree_on_loss_and_gradients(tiny_policy, small_batch, dtype, rtol) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(dtype)
    results = {s: _gradients(model, small_batch, s) for s in reconstruct.STRATEGIES}
    for strategy in ("prefix_merging", "trie"):
        _assert_same(results["per_request"], results[strategy], rtol)
    # The logprobs are not trivially equal: they are real, varied model outputs.
    assert float(results["trie"][0].logprobs.std()) > 0.1


def test_batch_has_the_hard_cases(small_batch) -> None:  # type: ignore[no-untyped-def]
    versions = {int(v) for chain in small_batch.chains for v in chain.policy_versions}
    assert len(versions) == 2
    assert any(call.finish_reason == "length" for c in small_batch.chains for call in c.calls)
    assert len(small_batch.chains) > len(small_batch.rollouts)  # forks
    groups = {r.group_id for r in small_batch.rollouts}
    assert len(groups) == 2


def test_trie_computes_exactly_the_lower_bound(small_batch) -> None:  # type: ignore[no-untyped-def]
    units = reconstruct.plan(small_batch, "trie")
    assert len(units) == 1
    assert units[0].n_tokens == reconstruct.trie_lower_bound(small_batch)
    merged = sum(len(c.ids) for c in small_batch.chains)
    per_call = sum(u.n_tokens for u in reconstruct.plan(small_batch, "per_request"))
    assert units[0].n_tokens < merged < per_call
    # Every shared prefix is stored once: two groups → two root segments, forks branch inside them.
    roots = [s for s in units[0].segments if s.parent is None]
    assert len(roots) == 2
    assert all(s.start_depth == 0 for s in roots)


def test_trie_positions_are_depths(small_batch) -> None:  # type: ignore[no-untyped-def]
    pack = reconstruct.plan(small_batch, "trie")[0]
    for segment in pack.segments:
        if segment.parent is not None:
            parent = pack.segments[segment.parent]
            assert segment.start_depth == parent.start_depth + len(parent.ids)


def test_small_packs_and_data_parallel_shards_still_agree(tiny_policy, small_batch) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float64)
    whole = _gradients(model, small_batch, "trie")
    packs = reconstruct.plan(small_batch, "trie", max_pack_tokens=200)
    assert len(packs) > 2
    assert sum(p.n_tokens for p in packs) > reconstruct.trie_lower_bound(small_batch)
    _assert_same(whole, _gradients(model, small_batch, "trie", max_pack_tokens=200), 2e-7)
    # Two ranks, each its own share: logprobs partition the loss tokens, gradients add up to the whole.
    shares = [
        _gradients(model, small_batch, "trie", max_pack_tokens=200, rank=r, world_size=2) for r in (0, 1)
    ]
    computed = shares[0][0].computed.int() + shares[1][0].computed.int()
    assert bool((computed == 1).all())
    for name, grad in whole[2].items():
        summed = shares[0][2].get(name, 0) + shares[1][2].get(name, 0)
        assert float((summed - grad).abs().max()) <= 2e-7 * float(grad.abs().max()), name


def test_bf16_autocast_runs_close_to_fp32(tiny_policy, small_batch) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float32)
    fp32 = reconstruct.compute(model, small_batch, "trie")
    bf16 = reconstruct.compute(model, small_batch, "trie", bf16_autocast=True)
    assert float((fp32.logprobs - bf16.logprobs).abs().mean()) < 0.05


def test_unknown_strategy_is_refused(small_batch) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="unknown reconstruction strategy"):
        reconstruct.plan(small_batch, "magic")


def test_chain_that_is_a_prefix_of_another() -> None:
    shape = WorkloadShape(
        groups=1, group_size=2, turns=2, prefix_tokens=8, tool_tokens=4, completion_tokens=3
    )
    batch = harness_batch(shape, seed=3)
    first = batch.rollouts[0].chains[0]
    from dataclasses import replace

    from services.learner.types import Chain, Rollout

    # A retry that stopped earlier: the same first call only. Its tokens are fully inside the other chain.
    retry = Chain("retry", first.rollout_id, first.group_id, first.calls[:1])
    rollouts = [replace(batch.rollouts[0], chains=(first, retry)), batch.rollouts[1]]
    batch2 = TrainingBatch([Rollout(r.rollout_id, r.group_id, r.reward, r.chains) for r in rollouts])
    pack = reconstruct.plan(batch2, "trie")[0]
    assert pack.n_tokens == reconstruct.trie_lower_bound(batch)
    canonical = np.concatenate([s.targets.canonical for s in pack.segments])
    assert sorted(canonical.tolist()) == list(range(batch2.n_loss_tokens))
