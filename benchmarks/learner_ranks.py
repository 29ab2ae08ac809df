"""``harnessrl bench learner --ranks N``: one GRPO step on N ``torchrun`` ranks, sharded (FSDP2) vs replicated.

For each layout — ``fsdp``, ``fsdp`` with activation checkpointing, ``replicate`` — N ranks (gloo on CPU, NCCL on
CUDA) build the random-weight model config, take a warm-up step and a timed step on the same harness-shaped batch
(trie strategy), and report per rank: the bytes that parameters, gradients and AdamW state hold after the step
(counted from the tensors: a sharded tensor counts its local shard), the step's peak memory (resident memory on
CPU, allocator peak on CUDA) and the step time. The headline figure is the sharded per-rank parameter + gradient
+ optimizer bytes as a share of the replicated figure (the issue's bound: at most 60% with two ranks).

Each layout runs in its own ``torchrun`` (fresh processes, so one layout's memory does not hide another's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from services.learner.synthetic import WorkloadShape
from shared.machine import describe_machine, load_average

RANKS_SHAPE = WorkloadShape(
    groups=2, group_size=4, turns=3, prefix_tokens=512, tool_tokens=100, completion_tokens=50
)  # two groups: one trie pack per rank (a group's pack is not split: that would lose its shared prefix)
LAYOUTS = {
    "fsdp": {"data_parallel": "fsdp", "activation_checkpointing": False},
    "fsdp+ac": {"data_parallel": "fsdp", "activation_checkpointing": True},
    "replicate": {"data_parallel": "replicate", "activation_checkpointing": False},
}


def worker(out_path: str, model_name: str, layout: str, shape_json: str) -> None:
    """One rank of one layout (run under torchrun)."""
    import torch
    import torch.distributed as dist

    from benchmarks.learner import build_model
    from services.learner import grpo
    from services.learner.distributed import init_from_env, shard_model
    from services.learner.memory import state_bytes
    from services.learner.reconstruct import resolve_bf16
    from services.learner.synthetic import harness_batch
    from services.learner.types import TrainingBatch

    torch.set_num_threads(1)
    rank, world = init_from_env()
    config = grpo.GRPOConfig(learning_rate=1e-5, **LAYOUTS[layout])  # type: ignore[arg-type]
    model = build_model(model_name)
    if torch.cuda.is_available():
        model = model.cuda()
    if config.activation_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    # FSDP2's shard groups: each decoder layer, and the root (embeddings, norm, head). While a group computes, its
    # parameters and then its gradients exist unsharded on every rank, on top of the sharded state.
    from services.learner.distributed import decoder_layers

    layer_bytes = [
        sum(p.numel() * p.element_size() for p in layer.parameters()) for layer in decoder_layers(model)
    ]
    root_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) - sum(layer_bytes)
    largest_group_bytes = max([root_bytes, *layer_bytes])
    if config.data_parallel == "fsdp":
        shard_model(model, bf16=resolve_bf16(config.bf16_autocast, next(model.parameters()).device))
    optimizer = grpo.make_optimizer(model, config)
    shape = WorkloadShape(**json.loads(shape_json))
    batch = TrainingBatch(grpo.with_advantages(harness_batch(shape, seed=0).rollouts, config))
    grpo.grpo_step(model, optimizer, batch, config, rank=rank, world_size=world)  # warm-up
    started = time.perf_counter()
    result = grpo.grpo_step(model, optimizer, batch, config, rank=rank, world_size=world)
    row = {
        "rank": rank,
        "state_bytes": state_bytes(model, optimizer),
        "largest_group_unsharded_bytes": 2 * largest_group_bytes if config.data_parallel == "fsdp" else 0,
        "peak_memory_bytes": result.metrics["peak_memory_bytes"],
        "peak_memory_step_bytes": result.metrics["peak_memory_step_bytes"],
        "step_s": time.perf_counter() - started,
        "tokens_computed": result.metrics["tokens_computed"],
    }
    rows: list[Any] = [None] * world
    dist.all_gather_object(rows, row)
    if rank == 0:
        Path(out_path).write_text(json.dumps(rows))
    dist.destroy_process_group()


GLOO_ABORT_TRIES = 3


def gloo_aborted(stderr: str) -> bool:
    """A rank died of SIGABRT after libstdc++'s bare terminate (gloo's connect-time abort), not of an error of its
    own (which exits 1 with its traceback)."""
    return "terminate called without an active exception" in stderr and "(SIGABRT)" in stderr


def run_ranks(ranks: int, model_name: str, shape: WorkloadShape, progress: Any = None) -> dict[str, Any]:
    import torch

    results: dict[str, Any] = {
        "machine": f"{describe_machine()} at the start; torch {torch.__version__}",
        "ranks": ranks,
        "model": model_name,
        "workload": asdict(shape),
        "layouts": {},
    }
    for layout in LAYOUTS:
        if progress:
            progress(f"{model_name}: {layout} on {ranks} ranks ...")
        with tempfile.TemporaryDirectory(prefix="harnessrl-bench-ranks-") as tmp:
            out = Path(tmp) / "rows.json"
            command = [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node",
                str(ranks),
                "-m",
                "benchmarks.learner_ranks",
                str(out),
                model_name,
                layout,
                json.dumps(asdict(shape)),
            ]
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            for attempt in range(1, GLOO_ABORT_TRIES + 1):
                done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
                if done.returncode == 0 or not gloo_aborted(done.stderr) or attempt == GLOO_ABORT_TRIES:
                    break
                # gloo's TCP transport can abort both ranks while they connect (pytorch/pytorch#188266): the
                # launch is repeated and the result says so; any other failure is reported at once.
                results.setdefault("relaunched_after_gloo_abort", []).append(layout)
            if done.returncode != 0:
                raise RuntimeError(
                    f"{layout} on {ranks} ranks failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
                )
            results["layouts"][layout] = json.loads(out.read_text())
    replicated = max(r["state_bytes"]["total"] for r in results["layouts"]["replicate"])
    for layout, rows in results["layouts"].items():
        results.setdefault("summary", {})[layout] = {
            "state_bytes_per_rank": max(r["state_bytes"]["total"] for r in rows),
            "state_share_of_replicated": max(r["state_bytes"]["total"] for r in rows) / replicated,
            # Within the step: the sharded state plus one group's unsharded parameters and gradients.
            "in_step_share_of_replicated": max(
                r["state_bytes"]["total"] + r["largest_group_unsharded_bytes"] for r in rows
            )
            / replicated,
            "peak_memory_bytes_per_rank": max(r["peak_memory_bytes"] for r in rows),
            "step_s": max(r["step_s"] for r in rows),
        }
    results["load_average_at_end"] = load_average()
    return results


def render(results: dict[str, Any]) -> str:
    lines = [
        f"{results['ranks']} ranks, model {results['model']}, workload {json.dumps(results['workload'])}",
        f"{results['machine']}; load average at the end: {results['load_average_at_end']}",
        f"{'layout':<12}{'params+grads+optim MiB/rank':>30}{'share of replicated':>22}{'in-step share':>15}"
        f"{'peak RSS MiB/rank':>19}{'step s':>9}",
    ]
    for layout, row in results["summary"].items():
        lines.append(
            f"{layout:<12}{row['state_bytes_per_rank'] / 2**20:>30.1f}{row['state_share_of_replicated']:>22.2f}"
            f"{row['in_step_share_of_replicated']:>15.2f}{row['peak_memory_bytes_per_rank'] / 2**20:>19.0f}"
            f"{row['step_s']:>9.1f}"
        )
    lines.append(
        "share of replicated: parameters + gradients + AdamW state held per rank (sharded tensors count their local "
        "shard); in-step share adds the largest shard group's unsharded parameters and gradients, which exist on "
        "each rank while that group computes; peak RSS is the whole process (runtime, activations, buffers)"
    )
    return "\n".join(lines)


def shape_for(quick: bool, prefix_tokens: int | None) -> WorkloadShape:
    shape = (
        WorkloadShape(group_size=2, turns=2, prefix_tokens=64, tool_tokens=16, completion_tokens=8)
        if quick
        else RANKS_SHAPE
    )
    return replace(shape, prefix_tokens=prefix_tokens) if prefix_tokens is not None else shape


if __name__ == "__main__":
    worker(*sys.argv[1:5])
