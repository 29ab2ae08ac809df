"""``harnessrl bench learner``: the three reconstruction strategies on a harness-shaped GRPO batch.

Workload (default): one group of 8 rollouts, 10 turns each, a 4,096-token shared prefix (system prompt + tool
schemas + task), 300-token tool outputs, 150-token completions. Two model configs with random weights (no
download): ``tiny`` (the test model's shape: hidden 256, 4 layers, attention ~75% of the FLOPs at this context)
and ``wide`` (hidden 1024, MLP 8192, 1 layer: MLPs dominate, as in billion-parameter models).

For each strategy it reports tokens computed, the analytic FLOPs of forward+backward (linear layers on every
computed token, attention over each token's real context — its depth — and the output head only where a loss
token is predicted; backward = 2x forward), the step time (forward+backward of the GRPO loss), the peak memory
above the loaded model, and the ratios between strategies. Step time is the learner process's CPU time: the
learner runs single-threaded (``OMP_NUM_THREADS=1``), so CPU seconds measure its work even when other processes
share the cores; wall time is reported next to it. With ``--repeats N`` the strategies run in N interleaved rounds
and each keeps its fastest, so a burst of load from other processes hits all of them alike. Peak memory is
sampled during each strategy's run, above the level just before it (freed heap returned to the OS first); each
model config runs in a fresh process.

``per_request`` recomputes every turn's whole prompt and takes minutes at a 4k prefix; it is measured on the
sequences of one rollout and multiplied by the number of rollouts. That scaling is exact by count: every rollout
of the synthetic group has the same lengths (checked), so every rollout's sequences have the same shapes. Tokens
and FLOPs are always counted over the whole batch.

Loading: the batch's calls are written as gateway token segments (``.npz``) to a local object store; the timed
load reads them back, rebuilds the chains, computes advantages and builds the packs (``load_s`` + ``plan_s``),
reported as a share of the step time.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import click

from services.learner.memory import PeakMemory
from services.learner.synthetic import WorkloadShape, harness_batch
from shared.machine import describe_machine, load_average

MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
    ),
    "wide": dict(
        hidden_size=1024,
        intermediate_size=8192,
        num_hidden_layers=1,
        num_attention_heads=16,
        num_key_value_heads=8,
    ),
}
FULL = WorkloadShape()
QUICK = WorkloadShape(group_size=4, turns=3, prefix_tokens=256, tool_tokens=48, completion_tokens=24)


@dataclass(kw_only=True)
class Measurement:
    strategy: str
    tokens_computed: int
    flops: float
    step_cpu_s: float
    step_wall_s: float
    peak_memory_bytes: int
    load_s: float
    plan_s: float
    measured_fraction: float


def build_model(name: str):  # type: ignore[no-untyped-def]
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from services.learner import trie_attention

    config = AutoConfig.for_model(
        "qwen3",
        vocab_size=4096,
        head_dim=64,
        max_position_embeddings=16384,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        **MODEL_CONFIGS[name],
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    trie_attention.install(model)
    model.train()
    return model


def analytic_flops(units: list, model_config: Any) -> float:  # type: ignore[type-arg]
    """Forward+backward FLOPs of computing ``units`` (see the module docstring)."""
    from services.learner.reconstruct import TriePack

    h, inter = model_config.hidden_size, model_config.intermediate_size
    layers, heads, kv_heads = (
        model_config.num_hidden_layers,
        model_config.num_attention_heads,
        model_config.num_key_value_heads,
    )
    head_dim, vocab = model_config.head_dim, model_config.vocab_size
    linear_per_token = (
        2
        * layers
        * (h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h + 3 * h * inter)
    )
    tokens = context = targets = 0.0
    for unit in units:
        runs = (
            [(len(s.ids), s.start_depth, len(s.targets.canonical)) for s in unit.segments]
            if isinstance(unit, TriePack)
            else [(unit.n_tokens, 0, len(unit.targets.canonical))]
        )
        for n, start, n_targets in runs:
            tokens += n
            context += n * start + n * (n + 1) / 2  # keys each query attends: its depth + 1
            targets += n_targets
    attention = layers * 2 * 2 * heads * head_dim * context  # QK^T and PV
    head = 2 * targets * h * vocab
    return 3.0 * (tokens * linear_per_token + attention + head)


def _segments_to_store(batch, root: Path) -> list:  # type: ignore[no-untyped-def, type-arg]
    """Store every call's segment as the gateway does; returns each chain's call facts (what its rows hold)."""
    from shared.objectstore import LocalObjectStore
    from shared.trajectory import put_segment

    store = LocalObjectStore(root)
    facts = []
    for chain in batch.chains:
        chain_facts = chain.call_facts("bench")
        for fact, segment in zip(chain_facts, chain.calls, strict=True):
            put_segment(store, fact.tokens_key, segment)
        facts.append(chain_facts)
    return facts


def _load_batch(batch, facts, root: Path):  # type: ignore[no-untyped-def]
    """Read every call's segment back (concurrently, as the learner's loader does) and rebuild the batch, checked
    against the call facts as the loader checks rows. Returns the batch and the seconds that took (module imports
    excluded: a running learner has them)."""
    from services.learner.types import Rollout, TrainingBatch
    from shared.objectstore import LocalObjectStore
    from shared.trajectory import Chain, fetch_segments

    started = time.perf_counter()
    store = LocalObjectStore(root)
    fetched = fetch_segments(store, (fact.tokens_key for chain_facts in facts for fact in chain_facts))
    facts_of = iter(facts)
    rollouts = []
    for rollout in batch.rollouts:
        chains = tuple(
            Chain.from_rows(next(facts_of), fetched, rollout_id=chain.rollout_id, group_id=chain.group_id)
            for chain in rollout.chains
        )
        rollouts.append(
            Rollout(
                rollout_id=rollout.rollout_id, group_id=rollout.group_id, reward=rollout.reward, chains=chains
            )
        )
    return TrainingBatch(rollouts), time.perf_counter() - started


def measure_model(model_name: str, shape: WorkloadShape, repeats: int) -> list[Measurement]:
    """Every strategy on one model, in this process. Repeats run the strategies interleaved (a round of each,
    then the next round) and keep each one's fastest round, so a burst of load on a shared machine hits all
    strategies alike and does not decide a ratio."""
    import torch

    from services.learner import grpo, reconstruct
    from services.learner.types import TrainingBatch

    torch.set_num_threads(1)
    model = build_model(model_name)
    config = grpo.GRPOConfig()
    source = harness_batch(shape, seed=0)
    with tempfile.TemporaryDirectory(prefix="harnessrl-bench-") as tmp:
        facts = _segments_to_store(source, Path(tmp))
        loaded, load_s = _load_batch(source, facts, Path(tmp))
    batch = TrainingBatch(grpo.with_advantages(loaded.rollouts, config))
    objective = grpo.TokenObjective(batch, config, torch.device("cpu"))
    warm = TrainingBatch(grpo.with_advantages(harness_batch(QUICK, seed=1).rollouts, config))
    plans: dict[str, Any] = {}
    for strategy in reconstruct.STRATEGIES:
        started = time.perf_counter()
        units = reconstruct.plan(batch, strategy)
        plan_s = time.perf_counter() - started
        measured, scale = units, 1.0
        if strategy == "per_request":
            if len({len(c.ids) for c in batch.chains}) != 1 or any(
                len(r.chains) != 1 for r in batch.rollouts
            ):
                raise RuntimeError("per_request scaling needs identically shaped rollouts of one chain each")
            measured = units[: shape.turns]  # the first rollout's calls
            scale = len(units) / len(measured)
        plans[strategy] = (units, measured, scale, plan_s)
        # Warm-up on a small batch: first-call kernel set-up is not part of a step.
        reconstruct.compute(model, warm, strategy, grpo.TokenObjective(warm, config, torch.device("cpu")))
    best: dict[str, tuple[float, float]] = {}
    peaks: dict[str, int] = {}
    for _ in range(repeats):
        for strategy, (_units, measured, scale, _plan_s) in plans.items():
            model.zero_grad(set_to_none=True)
            with PeakMemory() as rss:
                cpu0, wall0 = time.process_time(), time.perf_counter()
                reconstruct.compute(model, batch, strategy, objective, units=measured)
                cpu_s, wall_s = time.process_time() - cpu0, time.perf_counter() - wall0
            if strategy not in best or cpu_s * scale < best[strategy][0]:
                best[strategy] = (cpu_s * scale, wall_s * scale)
            peaks[strategy] = max(peaks.get(strategy, 0), rss.above_start)
    return [
        Measurement(
            strategy=strategy,
            tokens_computed=sum(u.n_tokens for u in units),
            flops=analytic_flops(units, model.config),
            step_cpu_s=best[strategy][0],
            step_wall_s=best[strategy][1],
            peak_memory_bytes=peaks[strategy],
            load_s=load_s,
            plan_s=plan_s,
            measured_fraction=1 / scale,
        )
        for strategy, (units, _measured, scale, plan_s) in plans.items()
    ]


def _child(args: tuple[str, WorkloadShape, int], queue: Any) -> None:
    try:
        queue.put(("ok", [asdict(m) for m in measure_model(*args)]))
    except BaseException as exc:  # report to the parent instead of dying silently
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


def measure_isolated(model_name: str, shape: WorkloadShape, repeats: int) -> list[Measurement]:
    """``measure_model`` in a fresh process: each model's memory and allocator state are its own."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=((model_name, shape, repeats), queue))
    process.start()
    status, payload = queue.get()
    process.join()
    if status != "ok":
        raise RuntimeError(f"{model_name}: {payload}")
    return [Measurement(**m) for m in payload]


def run_bench(
    shape: WorkloadShape, models: list[str], progress: Any = None, repeats: int = 1
) -> dict[str, Any]:
    import torch

    from services.learner import reconstruct

    lower_bound = reconstruct.trie_lower_bound(harness_batch(shape, seed=0))
    results: dict[str, Any] = {
        "machine": f"{describe_machine()} at the start; torch {torch.__version__} CPU, OMP_NUM_THREADS=1",
        "workload": asdict(shape),
        "repeats": repeats,
        "trie_lower_bound_tokens": lower_bound,
        "models": {},
    }
    for name in models:
        if progress:
            progress(f"{name}: {', '.join(reconstruct.STRATEGIES)} x {repeats} round(s) ...")
        rows = {m.strategy: asdict(m) for m in measure_isolated(name, shape, repeats)}
        trie = rows["trie"]
        ratios = {}
        for other in ("per_request", "prefix_merging"):
            flop_ratio = rows[other]["flops"] / trie["flops"]
            time_ratio = rows[other]["step_cpu_s"] / trie["step_cpu_s"]
            ratios[f"{other}/trie"] = {
                "tokens": rows[other]["tokens_computed"] / trie["tokens_computed"],
                "flops": flop_ratio,
                "time": time_ratio,
                "wall_time": rows[other]["step_wall_s"] / trie["step_wall_s"],
                "time_over_flop_ratio": time_ratio / flop_ratio,
            }
        results["models"][name] = {
            "config": MODEL_CONFIGS[name],
            "strategies": rows,
            "ratios": ratios,
            "trie_tokens_equal_lower_bound": trie["tokens_computed"] == lower_bound,
            "load_and_pack_share_of_step": (trie["load_s"] + trie["plan_s"]) / trie["step_cpu_s"],
        }
    results["load_average_at_end"] = load_average()
    return results


def render(results: dict[str, Any]) -> str:
    lines = [
        f"workload: {json.dumps(results['workload'])}",
        f"trie lower bound: {results['trie_lower_bound_tokens']} tokens; {results['machine']}",
        "per_request time: measured on one rollout's calls, scaled exactly by count (identical rollouts)",
        f"load average (1/5/15 min) at the end: {results.get('load_average_at_end', 'unknown')}",
    ]
    for name, model in results["models"].items():
        lines.append(f"\n{name} {json.dumps(model['config'])}")
        lines.append(
            f"{'strategy':<16}{'tokens':>10}{'TFLOP':>9}{'cpu s':>10}{'wall s':>10}{'peak MiB':>10}{'measured':>10}"
        )
        for strategy, row in model["strategies"].items():
            lines.append(
                f"{strategy:<16}{row['tokens_computed']:>10}{row['flops'] / 1e12:>9.2f}{row['step_cpu_s']:>10.1f}"
                f"{row['step_wall_s']:>10.1f}{row['peak_memory_bytes'] / 2**20:>10.0f}{row['measured_fraction']:>10.3f}"
            )
        for pair, r in model["ratios"].items():
            lines.append(
                f"{pair:<22} tokens {r['tokens']:.2f}x  FLOPs {r['flops']:.2f}x  time {r['time']:.2f}x "
                f"(wall {r['wall_time']:.2f}x)  time/FLOP ratio {r['time_over_flop_ratio']:.2f}"
            )
        lines.append(
            f"trie tokens == lower bound: {model['trie_tokens_equal_lower_bound']}; "
            f"load+pack share of step: {model['load_and_pack_share_of_step'] * 100:.2f}%"
        )
    return "\n".join(lines)


@click.command("learner")
@click.option("--quick", is_flag=True, help="A small workload for CI smoke runs (seconds, not minutes).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option(
    "--model",
    "models",
    multiple=True,
    type=click.Choice(sorted(MODEL_CONFIGS)),
    help="Model config(s); default both.",
)
@click.option("--prefix-tokens", type=int, default=None, help="Override the shared prefix length.")
@click.option(
    "--repeats", type=click.IntRange(1, 10), default=1, help="Interleaved rounds; the fastest counts."
)
@click.option(
    "--ranks",
    type=click.IntRange(1, 64),
    default=1,
    help="With N > 1: one step on N torchrun ranks, FSDP2 vs replicated memory per rank (learner_ranks.py).",
)
def bench_learner(
    quick: bool, as_json: bool, models: tuple[str, ...], prefix_tokens: int | None, repeats: int, ranks: int
) -> None:
    """Tokens, FLOPs, step time and memory of per_request vs prefix_merging vs trie reconstruction."""
    os.environ["OMP_NUM_THREADS"] = "1"
    progress = None if as_json else (lambda msg: click.echo(msg, err=True))
    if ranks > 1:
        from benchmarks import learner_ranks

        out = [
            learner_ranks.run_ranks(ranks, name, learner_ranks.shape_for(quick, prefix_tokens), progress)
            for name in (models or ("wide",))
        ]
        click.echo(json.dumps(out) if as_json else "\n\n".join(learner_ranks.render(r) for r in out))
        return
    shape = QUICK if quick else FULL
    if prefix_tokens is not None:
        shape = replace(shape, prefix_tokens=prefix_tokens)
    results = run_bench(shape, list(models) or sorted(MODEL_CONFIGS), progress, repeats)
    click.echo(json.dumps(results) if as_json else render(results))
    sys.stdout.flush()
