"""The three reconstruction strategies give the same loss-token logprobs, loss and gradients."""

from __future__ import annotations

import os
import platform

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


def test_packed_trie_agrees_with_per_request(tiny_policy, small_batch) -> None:  # type: ignore[no-untyped-def]
    """The sharded CPU path (one forward per pack, blocks inside the attention) computes the same numbers."""
    model = tiny_policy(torch.float64)
    reference = _gradients(model, small_batch, "per_request")
    _assert_same(reference, _gradients(model, small_batch, "trie", trie_attention="packed"), 2e-7)
    _assert_same(
        reference, _gradients(model, small_batch, "trie", trie_attention="packed", max_pack_tokens=200), 2e-7
    )


@pytest.mark.parametrize("attention", ["blocks", "packed"])
def test_activation_checkpointing_gives_the_same_gradients(tiny_policy, small_batch, attention) -> None:  # type: ignore[no-untyped-def]
    plain = tiny_policy(torch.float64)
    reference = _gradients(plain, small_batch, "trie", trie_attention=attention)
    checkpointed = tiny_policy(torch.float64)
    checkpointed.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    _assert_same(reference, _gradients(checkpointed, small_batch, "trie", trie_attention=attention), 1e-9)


def test_batch_has_the_hard_cases(small_batch) -> None:  # type: ignore[no-untyped-def]
    versions = {int(v) for chain in small_batch.chains for v in chain.policy_versions}
    assert len(versions) == 2
    close = list(
        WorkloadShape.close_ids
    )  # a turn cut by max_tokens: the next suffix opens with the closing ids
    assert any(
        call.suffix_ids[: len(close)].tolist() == close for c in small_batch.chains for call in c.calls[1:]
    )
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


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo") as cpuinfo:
        return next(
            (set(line.split(":", 1)[1].split()) for line in cpuinfo if line.startswith("flags")), set()
        )


@pytest.mark.skipif(platform.machine() != "x86_64" or not os.path.exists("/proc/cpuinfo"), reason="x86 Linux")
def test_auto_bf16_is_what_the_cpu_multiplies_natively() -> None:
    """``auto`` picks bf16 on a CPU with AVX-512 (oneDNN's bf16 kernels: avx512f/bw/vl/dq, or AMX), fp32 on an
    AVX2-only CPU, where bf16 is emulated and a step ~18x slower; an explicit choice stands whatever the CPU."""
    cpu = torch.device("cpu")
    native = {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= _cpu_flags() or "amx_bf16" in _cpu_flags()
    assert reconstruct.resolve_bf16("auto", cpu) is native
    assert reconstruct.resolve_bf16(True, cpu) is True and reconstruct.resolve_bf16(False, cpu) is False
    with pytest.raises(ValueError, match="unknown bf16_autocast 'fast'"):
        reconstruct.resolve_bf16("fast", cpu)


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

    from services.learner.types import Rollout
    from shared.trajectory import Chain

    # A retry that stopped earlier: the same first call only. Its tokens are fully inside the other chain.
    retry = Chain("retry", first.rollout_id, first.group_id, first.calls[:1])
    rollouts = [replace(batch.rollouts[0], chains=(first, retry)), batch.rollouts[1]]
    batch2 = TrainingBatch(
        [
            Rollout(rollout_id=r.rollout_id, group_id=r.group_id, reward=r.reward, chains=r.chains)
            for r in rollouts
        ]
    )
    pack = reconstruct.plan(batch2, "trie")[0]
    assert pack.n_tokens == reconstruct.trie_lower_bound(batch)
    canonical = np.concatenate([s.targets.canonical for s in pack.segments])
    assert sorted(canonical.tolist()) == list(range(batch2.n_loss_tokens))


# --- the packed FlexAttention path (the GPU path; forward-only on CPU, where FlexAttention has no backward) ---


@pytest.mark.parametrize("max_pack_tokens", [1 << 20, 200])
def test_flex_packed_trie_gives_the_same_logprobs(tiny_policy, small_batch, max_pack_tokens) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float64)
    reference = reconstruct.compute(model, small_batch, "per_request")
    flex = reconstruct.compute(
        model, small_batch, "trie", max_pack_tokens=max_pack_tokens, trie_attention="flex"
    )
    assert bool(flex.computed.all())
    assert flex.tokens_computed == sum(
        u.n_tokens for u in reconstruct.plan(small_batch, "trie", max_pack_tokens)
    )
    assert torch.allclose(reference.logprobs, flex.logprobs, rtol=2e-7, atol=2e-7)
    assert float(flex.logprobs.std()) > 0.1


def test_flex_mask_is_the_trie_ancestry(small_batch) -> None:  # type: ignore[no-untyped-def]
    """Token q sees token kv exactly when kv is q or one of q's trie ancestors (checked against parent links)."""
    from services.learner.trie_attention import pack_block_mask

    pack = reconstruct.plan(small_batch, "trie")[0]
    length = reconstruct.flex_length(pack.n_tokens)
    layout = reconstruct.PackLayout.of(pack, length)
    assert length % 128 == 0 and length >= pack.n_tokens
    # Expected: walk parent links token by token.
    parent_token = np.full(length, -1)
    starts = np.cumsum([0] + [len(s.ids) for s in pack.segments])
    for index, segment in enumerate(pack.segments):
        first = starts[index]
        if segment.parent is not None:
            parent_token[first] = starts[segment.parent + 1] - 1  # the parent segment's last token
        parent_token[first + 1 : starts[index + 1]] = np.arange(first, starts[index + 1] - 1)
    expected = np.zeros((length, length), bool)
    for q in range(pack.n_tokens):
        node = q
        while node >= 0:
            expected[q, node] = True
            node = parent_token[node]
    for q in range(pack.n_tokens, length):  # padding sees earlier padding only
        expected[q, pack.n_tokens : q + 1] = True
    mask = pack_block_mask(torch.from_numpy(layout.segment_of_token), torch.from_numpy(layout.subtree_end))
    q, kv = torch.arange(length)[:, None], torch.arange(length)[None, :]
    dense = mask.mask_mod(0, 0, q, kv).numpy()
    assert (dense == expected).all()
    # Positions are depths: each token's position is its number of ancestors.
    assert (layout.positions[: pack.n_tokens] == expected[: pack.n_tokens].sum(1) - 1).all()
    # Blocks with nothing visible are skipped by the kernel: the mask is genuinely sparse.
    assert mask.sparsity() > 40


def test_flex_lengths_are_few_and_tight() -> None:
    lengths = {reconstruct.flex_length(n) for n in range(1, 200_000, 97)}
    assert all(length % 128 == 0 for length in lengths)
    assert len(lengths) < 120
    for n in (1, 127, 128, 129, 5_000, 37_696, 131_072, 199_999):
        assert n <= reconstruct.flex_length(n) <= max(n + 127, n * 1.126)


def test_flex_refuses_to_train_on_cpu(tiny_policy, small_batch) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float32)
    config = grpo.GRPOConfig()
    batch = TrainingBatch(grpo.with_advantages(small_batch.rollouts, config))
    objective = grpo.TokenObjective(batch, config, torch.device("cpu"))
    with pytest.raises(RuntimeError, match="no CPU backward"):
        reconstruct.compute(model, batch, "trie", objective, trie_attention="flex")
    with pytest.raises(
        ValueError, match="trie_attention\n  Input should be 'auto', 'blocks', 'packed' or 'flex'"
    ):
        grpo.GRPOConfig.model_validate({"trie_attention": "dense"})


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the FlexAttention backward needs CUDA")
def test_flex_gradients_match_on_cuda(tiny_policy, small_batch) -> None:  # type: ignore[no-untyped-def]
    model = tiny_policy(torch.float32).cuda()
    config = grpo.GRPOConfig(aggregation="sequence")
    batch = TrainingBatch(grpo.with_advantages(small_batch.rollouts, config))
    results = {}
    for strategy, attention in (("per_request", "auto"), ("trie", "flex")):
        objective = grpo.TokenObjective(batch, config, torch.device("cuda"))
        model.zero_grad(set_to_none=True)
        out = reconstruct.compute(model, batch, strategy, objective, trie_attention=attention)
        results[strategy] = (out.logprobs, {n: p.grad.clone() for n, p in model.named_parameters()})
    (ref_lp, ref_grads), (lp, grads) = results["per_request"], results["trie"]
    assert torch.allclose(ref_lp, lp, rtol=1e-4, atol=1e-4)
    for name, grad in ref_grads.items():
        assert float((grad - grads[name]).abs().max()) <= 1e-3 * float(grad.abs().max()), name


def test_trie_packs_are_split_for_several_ranks(small_batch) -> None:  # type: ignore[no-untyped-def]
    """One pack per batch would leave all ranks but one idle: with N ranks a pack holds at most 1/N of the
    batch's distinct tokens, and the two groups (one shared prefix each) land on different ranks whole."""
    whole = reconstruct.trie_lower_bound(small_batch)
    assert reconstruct.pack_budget(small_batch, 1 << 20, 1) == 1 << 20
    budget = reconstruct.pack_budget(small_batch, 1 << 20, 2)
    packs = reconstruct.plan(small_batch, "trie", budget)
    assert len(packs) >= 2 and all(p.n_tokens <= budget for p in packs)
    owned = reconstruct.assign_units(packs, 2)
    loads = [sum(packs[i].n_tokens for i in o) for o in owned]
    assert min(loads) > 0.3 * whole
