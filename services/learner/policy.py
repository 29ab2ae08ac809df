"""Loading the policy for training: a Hugging Face causal LM with the trie-aware attention installed."""

from __future__ import annotations

from pathlib import Path

import torch

from services.learner import trie_attention


def load_policy(model_dir: Path, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    trie_attention.install(model)
    model.train()
    return model  # type: ignore[no-any-return]
