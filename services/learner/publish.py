"""Publishing a policy version: the full weights, or (LoRA runs) only the adapter, in the served dtype.

Full weights go to ``weights/<run>/<version>/model.safetensors`` holding exactly the tensors of the served model
directory, under their Hugging Face names: a tied output head is left out (it *is* the embedding), the way
``save_pretrained`` writes it and the inference service's checkpoint validation expects. A LoRA run publishes
``adapters/<run>/<version>/adapter_model.safetensors`` + ``adapter_config.json`` (peft's format, which vLLM loads),
a few MB instead of the model.

Tensors are cast to the served dtype (``policy.served_dtype``: bf16 for real checkpoints) before they move. A
sharded (FSDP2) parameter is gathered one tensor at a time, from shards already cast, onto every rank; rank 0
keeps it — so no rank ever holds a full fp32 copy of the model, and rank 0 holds the published size. Every rank
calls ``put_weights`` (the gathers are collectives); rank 0 alone writes the object store.

The learner writes the ``weights`` row (with the blob's sha256) in its step transaction and then announces the
version on the ``weights`` channel (``shared.events.publish_weights``).
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save

from shared.adapters import adapter_config_key, adapter_key
from shared.objectstore import ObjectStore


def weights_key(run_id: str, version: int) -> str:
    return f"weights/{run_id}/{version}/model.safetensors"


@dataclass(frozen=True)
class PublishedWeights:
    object_key: str
    size_bytes: int
    sha256: str


def is_lora(model: torch.nn.Module) -> bool:
    return hasattr(model, "peft_config")


def _gathered(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    tensor = tensor.detach()
    if hasattr(tensor, "full_tensor"):  # a DTensor shard: cast locally, then all-gather the cast shards
        tensor = tensor.to(dtype).full_tensor()
    return tensor.to(device="cpu", dtype=dtype).contiguous()


def published_tensors(
    model: torch.nn.Module, dtype: torch.dtype, keep: bool = True
) -> dict[str, torch.Tensor]:
    """What a version publishes, by name, in ``dtype``; empty where ``keep`` is false (ranks > 0 only help
    gather)."""
    if is_lora(model):
        from peft import get_peft_model_state_dict

        source = get_peft_model_state_dict(model)
    else:
        tied = bool(getattr(model.config, "tie_word_embeddings", False))
        source = {k: v for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    out: dict[str, torch.Tensor] = {}
    for name, tensor in source.items():
        full = _gathered(tensor, dtype)
        if keep:
            out[name] = full
    return out


def adapter_config_bytes(model: torch.nn.Module) -> bytes:
    config: Any = model.peft_config["default"]  # type: ignore[index]
    with tempfile.TemporaryDirectory(prefix="harnessrl-adapter-") as tmp:
        config.save_pretrained(tmp)
        return (Path(tmp) / "adapter_config.json").read_bytes()


def weights_bytes(model: torch.nn.Module, dtype: torch.dtype = torch.float32) -> bytes:
    return save(published_tensors(model, dtype))


def put_weights(
    store: ObjectStore,
    run_id: str,
    version: int,
    model: torch.nn.Module,
    dtype: torch.dtype = torch.float32,
    rank: int = 0,
) -> PublishedWeights | None:
    """Publish ``model`` as ``version``; returns what rank 0 wrote (None on other ranks)."""
    tensors = published_tensors(model, dtype, keep=rank == 0)
    if rank != 0:
        return None
    blob = save(tensors)
    if is_lora(model):
        key = adapter_key(run_id, version)
        store.put_bytes(adapter_config_key(key), adapter_config_bytes(model), "application/json")
    else:
        key = weights_key(run_id, version)
    store.put_bytes(key, blob)
    return PublishedWeights(key, len(blob), hashlib.sha256(blob).hexdigest())


def read_published(store: ObjectStore, object_key: str, sha256: str | None) -> dict[str, torch.Tensor]:
    """A published version's tensors (what ``put_weights`` wrote), checked against its ``weights`` row's sha256."""
    from safetensors.torch import load

    blob = store.get_bytes(object_key)
    if sha256 is not None and hashlib.sha256(blob).hexdigest() != sha256:
        raise ValueError(f"{object_key} does not match its weights row's sha256")
    return load(blob)
