"""Publishing a policy version: safetensors to ``weights/<run>/<version>/model.safetensors``.

The blob holds exactly the tensors of the served model directory, under their Hugging Face names: a tied output
head is left out (it *is* the embedding), the way ``save_pretrained`` writes it and the inference service's
checkpoint validation expects. The learner writes the ``weights`` row (with the blob's sha256) in its step
transaction and then announces the version on the ``weights`` channel (``shared.events.publish_weights``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from safetensors.torch import save

from shared.objectstore import ObjectStore


def weights_key(run_id: str, version: int) -> str:
    return f"weights/{run_id}/{version}/model.safetensors"


@dataclass(frozen=True)
class PublishedWeights:
    object_key: str
    size_bytes: int
    sha256: str


def weights_bytes(model: torch.nn.Module) -> bytes:
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    tensors = {
        name: tensor.detach().to("cpu").contiguous()
        for name, tensor in model.state_dict().items()
        if not (tied and name == "lm_head.weight")
    }
    return save(tensors)


def put_weights(store: ObjectStore, run_id: str, version: int, model: torch.nn.Module) -> PublishedWeights:
    blob = weights_bytes(model)
    key = weights_key(run_id, version)
    store.put_bytes(key, blob)
    return PublishedWeights(key, len(blob), hashlib.sha256(blob).hexdigest())
