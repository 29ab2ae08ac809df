"""Smoke run of ``harnessrl bench inference``'s measurements against the session's vLLM server."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.inference import _table, run_bench
from shared.inference_client import InferenceClient
from tests.fixtures.model import label_base_version

pytestmark = [pytest.mark.bench, pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


async def test_bench_measures_throughput_and_a_swap_and_restores_the_weights(
    vllm_server: str, tiny_model_dir: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    async with InferenceClient(vllm_server) as client:
        before = await client.complete([4088, 10, 20], max_tokens=8, seed=1, ignore_eos=True)
    figures = await run_bench(vllm_server, tiny_model_dir, [1, 4], 8, 1, 1, settings)
    assert [row["concurrency"] for row in figures["throughput"]] == [1, 4]
    assert [row["tokens"] for row in figures["throughput"]] == [16, 32]
    assert all(row["tokens_per_s"] > 0 for row in figures["throughput"])
    (swap,) = figures["swaps"]
    assert swap["latency_ms"] >= swap["pause_ms"] > 0 and swap["prepare_ms"] > 0
    assert "tokens/s at concurrency 4" in _table(figures)
    async with InferenceClient(vllm_server) as client:
        after = await client.complete([4088, 10, 20], max_tokens=8, seed=1, ignore_eos=True)
    assert after.ids == before.ids and after.logprobs == pytest.approx(before.logprobs, abs=1e-6)
    label_base_version(vllm_server)
