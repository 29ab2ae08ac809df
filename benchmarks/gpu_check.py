"""The prepared GPU check (``scripts/gpu-check.sh``): what only a GPU can show about the learner, in one run.

It needs only torch, transformers and numpy (no vLLM, no database, no network: the model is built from a config
with random weights) and writes one JSON file. Three parts:

1. ``trie_gradients``: the trie's gradients against ``per_request`` on a batch with shared prefixes, forks, cut
   turns and mixed versions — on CUDA with the FlexAttention path (the unit test that skips without CUDA), on CPU
   with the packed path.
2. ``fsdp``: FSDP2 on this one device (a process group of one) takes the same step as the unsharded model.
3. ``bench``: one learner step per strategy on a random-weight model of Qwen3-4B's shape (hidden 2560, MLP 9728,
   32 heads / 8 KV heads, head_dim 128, vocab 151936, tied embeddings; ``--layers`` of its 36, said in the output)
   and the harness-shaped workload of ``harnessrl bench learner``: step time, tokens/s, peak memory, and the
   trie's time ratios against ``per_request`` and ``prefix_merging``. ``per_request`` runs one rollout's calls and
   is scaled by the number of rollouts (identical shapes), as in the CPU bench. bf16 compute with fp32 master
   weights and activation checkpointing per layer.

Without CUDA it runs the same code on CPU with a small config and workload (a test calls it that way), so the
script cannot rot while no GPU is at hand.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from services.learner import grpo, reconstruct, trie_attention
from services.learner.memory import PeakMemory
from services.learner.synthetic import WorkloadShape, harness_batch
from services.learner.types import TrainingBatch
from shared.machine import describe_machine

QWEN3_4B = dict(
    vocab_size=151936,
    hidden_size=2560,
    intermediate_size=9728,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    tie_word_embeddings=True,
)
SMALL = dict(
    vocab_size=4096,
    hidden_size=256,
    intermediate_size=768,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    tie_word_embeddings=False,
)
CHECK_SHAPE = WorkloadShape(
    groups=2,
    group_size=3,
    turns=3,
    prefix_tokens=64,
    tool_tokens=20,
    completion_tokens=10,
    fork_every=2,
    truncate_every=2,
    versions=2,
    vocab_size=4096,
)
GPU_BENCH_SHAPE = WorkloadShape(vocab_size=151936)  # 8 rollouts x 10 turns, 4,096-token shared prefix
CPU_BENCH_SHAPE = WorkloadShape(
    group_size=4, turns=3, prefix_tokens=256, tool_tokens=48, completion_tokens=24
)


def build(config: dict[str, Any], device: torch.device, init_on_device: bool = False) -> torch.nn.Module:
    """Random weights from ``config``: seeded on CPU (the same weights on every device) unless ``init_on_device``
    (the bench, where values do not matter and a 4B-shaped model initializes much faster on the GPU)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(
        "qwen3", max_position_embeddings=65536, rope_theta=1e6, rms_norm_eps=1e-6, **config
    )
    torch.manual_seed(0)
    with torch.device(device if init_on_device else "cpu"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model = model.to(device)
    trie_attention.install(model)
    model.train()
    return model  # type: ignore[no-any-return]


def _grads(
    model: torch.nn.Module, batch: TrainingBatch, strategy: str, attention: str
) -> tuple[torch.Tensor, dict]:  # type: ignore[type-arg]
    config = grpo.GRPOConfig(aggregation="sequence")
    batch = TrainingBatch(grpo.with_advantages(batch.rollouts, config))
    device = next(model.parameters()).device
    objective = grpo.TokenObjective(batch, config, device)
    model.zero_grad(set_to_none=True)
    out = reconstruct.compute(model, batch, strategy, objective, trie_attention=attention)
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.logprobs, grads


def check_trie_gradients(device: torch.device) -> dict[str, Any]:
    attention = "flex" if device.type == "cuda" else "packed"
    model = build(SMALL, device)
    batch = harness_batch(CHECK_SHAPE, seed=1)
    ref_lp, ref = _grads(model, batch, "per_request", "auto")
    lp, grads = _grads(model, batch, "trie", attention)
    worst = max(float((grads[n] - g).abs().max()) / max(float(g.abs().max()), 1e-30) for n, g in ref.items())
    logprob_diff = float((ref_lp - lp).abs().max())
    ok = worst <= 1e-3 and logprob_diff <= 1e-4 and len(grads) == len(ref)
    return {
        "ok": ok,
        "trie_attention": attention,
        "max_relative_gradient_difference": worst,
        "max_logprob_difference": logprob_diff,
    }


def check_fsdp(device: torch.device) -> dict[str, Any]:
    """FSDP2 with a process group of one on this device: the same step as the plain model."""
    import torch.distributed as dist

    from services.learner.distributed import shard_model

    if not dist.is_initialized():
        from shared.ports import free_port

        port = free_port()
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
    attention = "flex" if device.type == "cuda" else "packed"
    config = grpo.GRPOConfig(learning_rate=1e-3, trie_attention=attention)  # type: ignore[arg-type]
    batch = TrainingBatch(grpo.with_advantages(harness_batch(CHECK_SHAPE, seed=1).rollouts, config))
    after = {}
    for sharded in (False, True):
        model = build(SMALL, device)
        if sharded:
            shard_model(model, bf16=False)
        optimizer = grpo.make_optimizer(model, config)
        grpo.grpo_step(model, optimizer, batch, config)
        after[sharded] = {
            n: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().cpu()
            for n, p in model.named_parameters()
        }
    base = build(SMALL, torch.device("cpu")).state_dict()
    worst = 0.0
    for name, plain in after[False].items():
        moved = float((plain - base[name]).abs().max())
        worst = max(worst, float((after[True][name] - plain).abs().max()) / max(moved, 1e-30))
    dist.destroy_process_group()
    return {"ok": worst <= 5e-2, "max_difference_relative_to_step": worst, "trie_attention": attention}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench(device: torch.device, layers: int) -> dict[str, Any]:
    cuda = device.type == "cuda"
    config_dict = {**(QWEN3_4B if cuda else SMALL)}
    config_dict["num_hidden_layers"] = layers if cuda else config_dict["num_hidden_layers"]
    shape = GPU_BENCH_SHAPE if cuda else CPU_BENCH_SHAPE
    model = build(config_dict, device, init_on_device=True)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    config = grpo.GRPOConfig(bf16_autocast=cuda)
    batch = TrainingBatch(grpo.with_advantages(harness_batch(shape, seed=0).rollouts, config))
    objective = grpo.TokenObjective(batch, config, device)
    warm_shape = WorkloadShape(group_size=2, turns=2, prefix_tokens=128, tool_tokens=32, completion_tokens=16)
    warm = TrainingBatch(
        grpo.with_advantages(harness_batch(warm_shape, seed=1).rollouts, config)  # type: ignore[arg-type]
    )
    rows: dict[str, Any] = {}
    for strategy in reconstruct.STRATEGIES:
        units = reconstruct.plan(batch, strategy)
        measured, scale = units, 1.0
        if strategy == "per_request":
            measured = units[: shape.turns]  # the first rollout's calls; every rollout has the same shapes
            scale = len(units) / len(measured)
        reconstruct.compute(
            model,
            warm,
            strategy,
            grpo.TokenObjective(warm, config, device),
            bf16_autocast=cuda,
        )
        # Warm the kernels of this batch's lengths too (FlexAttention compiles once per padded pack length).
        reconstruct.compute(model, batch, strategy, objective, units=measured[:1], bf16_autocast=cuda)
        model.zero_grad(set_to_none=True)
        _sync(device)
        with PeakMemory(device) as memory:
            started = time.perf_counter()
            reconstruct.compute(model, batch, strategy, objective, units=measured, bf16_autocast=cuda)
            _sync(device)
            seconds = (time.perf_counter() - started) * scale
        tokens = sum(u.n_tokens for u in units)
        rows[strategy] = {
            "tokens_computed": tokens,
            "step_s": seconds,
            "tokens_per_s": tokens / seconds,
            "peak_memory_bytes": memory.peak,
            "measured_fraction": 1 / scale,
        }
    trie = rows["trie"]["step_s"]
    return {
        "model": config_dict,
        "layers_note": (
            f"{config_dict['num_hidden_layers']} of Qwen3-4B's 36 layers" if cuda else "small CPU config"
        ),
        "workload": asdict(shape),
        "precision": "bf16 compute, fp32 master weights" if cuda else "fp32",
        "activation_checkpointing": True,
        "strategies": rows,
        "ratios": {
            "per_request/trie": rows["per_request"]["step_s"] / trie,
            "prefix_merging/trie": rows["prefix_merging"]["step_s"] / trie,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu-check.json")
    parser.add_argument("--layers", type=int, default=18, help="Qwen3-4B-shaped layers in the bench (of 36).")
    parser.add_argument("--cpu", action="store_true", help="Run on CPU even if CUDA is available.")
    args = parser.parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else describe_machine(),
        "torch": torch.__version__,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "numpy": np.__version__,
    }
    started = time.perf_counter()
    for name, check in (
        ("trie_gradients", lambda: check_trie_gradients(device)),
        ("fsdp", lambda: check_fsdp(device)),
        ("bench", lambda: bench(device, args.layers)),
    ):
        t0 = time.perf_counter()
        try:
            result[name] = check()
        except Exception as exc:  # noqa: BLE001 - recorded in the JSON; the other checks still run
            result[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        result[name]["seconds"] = time.perf_counter() - t0
        print(f"{name}: {json.dumps(result[name])[:400]}", file=sys.stderr, flush=True)
        Path(args.out).write_text(
            json.dumps({**result, "status": "incomplete"}, indent=2)
        )  # survives a timeout
    result["seconds"] = time.perf_counter() - started
    result["status"] = (
        "ok"
        if result["trie_gradients"].get("ok") and result["fsdp"].get("ok") and "error" not in result["bench"]
        else "failed"
    )
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"gpu check {result['status']} on {result['device']} in {result['seconds']:.0f}s -> {args.out}")
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
