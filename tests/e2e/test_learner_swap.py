"""A learner step's published version is swapped in by the inference updater; the next calls carry it.

Real pieces end to end: the learner (in process) reads groups from Redis, trains, writes the safetensors and
the ``weights`` row, and publishes the event; the updater (listening on the channel) swaps the weights into a
real vLLM server; a completion then reports the new policy version and its logprobs match a transformers
recompute of the learner's own weights.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
from safetensors.torch import load
from sqlalchemy import select

from services.learner.loop import Learner
from shared.db import session_scope
from shared.inference_client import InferenceClient
from shared.models import Weight
from shared.pool import get_policy_version
from tests.e2e.test_inference_server import PROMPT, max_abs_diff, recompute_logprobs
from tests.e2e.test_inference_swap import model_copy_with, updater  # noqa: F401  (fixture reused)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


async def test_published_version_is_served_and_stamped_on_calls(  # type: ignore[no-untyped-def]
    updater,  # noqa: F811
    vllm_server,
    tiny_model_dir,
    settings,
    db,
    store,
    redis_client,
    learner_run,
    tmp_path,
) -> None:
    run = learner_run(groups_per_step=2, learning_rate=1e-2)
    run.add_group([1.0, 0.0, 0.5, 0.0], seed=1)
    run.add_group([0.0, 1.0, 1.0, 0.0], seed=2)
    stop = asyncio.Event()
    listening = asyncio.create_task(updater.run(stop, catch_up=False))
    await asyncio.sleep(1.0)  # subscribed before the learner publishes
    learner = await asyncio.to_thread(Learner, settings, run.run_id, "c1")
    try:
        report = await asyncio.to_thread(learner.step_once, 5.0)
    finally:
        learner.close()
    assert report is not None and report.policy_version == 1

    deadline = time.monotonic() + 120
    status = None
    while time.monotonic() < deadline and status not in ("served", "rejected", "failed"):
        await asyncio.sleep(0.5)
        with session_scope(db) as session:
            row = session.scalars(
                select(Weight).where(Weight.run_id == run.run_id, Weight.version == 1)
            ).one()
            status, error, key = row.status, row.error, row.object_key
    stop.set()
    await listening
    assert status == "served", error
    assert get_policy_version(redis_client) == 1

    trained = model_copy_with(tiny_model_dir, load(store.get_bytes(key)), tmp_path / "trained")
    async with InferenceClient(vllm_server) as client:
        sampled = await client.complete(PROMPT, max_tokens=24, seed=5, ignore_eos=True)
    assert sampled.policy_version == 1
    assert max_abs_diff(sampled.logprobs, recompute_logprobs(trained, PROMPT, sampled.ids)) < 1e-5
    assert max_abs_diff(sampled.logprobs, recompute_logprobs(tiny_model_dir, PROMPT, sampled.ids)) > 1e-3
    assert torch.is_tensor(load(store.get_bytes(key))["model.norm.weight"])
