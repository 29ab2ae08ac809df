"""Building the policy for training: a Hugging Face causal LM with the trie-aware attention installed, its weights
optionally replaced by another run's published version (``RunSpec.init``), optionally a LoRA adapter on it (peft),
activation checkpointing per decoder layer, and FSDP2 sharding across ranks.

Order matters: attention is installed on the plain model (peft forwards calls to it), LoRA wraps it, activation
checkpointing is switched on per decoder layer, and ``fully_shard`` comes last (it shards what exists).
"""

from __future__ import annotations

from pathlib import Path

import torch

from services.learner import trie_attention
from shared.run_config import LoraConfig


def load_policy(model_dir: Path, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    trie_attention.install(model)
    model.train()
    return model  # type: ignore[no-any-return]


def with_lora(model: torch.nn.Module, lora: LoraConfig) -> torch.nn.Module:
    """``model`` with a fresh LoRA adapter (B = 0, so the policy starts as the base model); only the adapter
    trains."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    config = PeftLoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        bias="none",
    )
    wrapped = get_peft_model(model, config)  # type: ignore[arg-type]
    wrapped.train()
    return wrapped  # type: ignore[no-any-return]


def load_weights(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Overwrite ``model``'s weights with a published version's tensors (``publish.published_tensors``: every
    tensor by its Hugging Face name, a tied output head left out), cast to the model's dtypes."""
    tied = bool(getattr(getattr(model, "config", None), "tie_word_embeddings", False))
    own = model.state_dict()
    missing = sorted(set(own) - set(state) - ({"lm_head.weight"} if tied else set()))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise ValueError(
            f"the init weights do not fit the model: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    with torch.no_grad():
        for name, tensor in state.items():
            own[name].copy_(tensor.to(own[name].dtype))


def build_policy(
    model_dir: Path,
    *,
    init_state: dict[str, torch.Tensor] | None = None,
    lora: LoraConfig | None = None,
    activation_checkpointing: bool = False,
    shard: bool = False,
    bf16: bool = False,
) -> torch.nn.Module:
    """The trainable policy; ``shard`` = FSDP2 over the default process group (``distributed.shard_model``)."""
    model = load_policy(model_dir)
    if init_state is not None:  # another run's version (RunSpec.init), before anything wraps the model
        load_weights(model, init_state)
    if torch.cuda.is_available():
        model = model.cuda()
    if activation_checkpointing:
        model.gradient_checkpointing_enable(  # type: ignore[operator]
            gradient_checkpointing_kwargs={"use_reentrant": False}
        )
    if lora is not None:
        model = with_lora(model, lora)
    if shard:
        from services.learner.distributed import shard_model

        shard_model(model, bf16=bf16)
    return model


def served_dtype(model_dir: Path) -> torch.dtype:
    """The dtype the inference service serves the model in: its config's (bf16 for real checkpoints, fp32 for the
    tiny test model). Published weights use it, so they are half the fp32 master's size where it is bf16."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or torch.float32
    return getattr(torch, dtype) if isinstance(dtype, str) else dtype
