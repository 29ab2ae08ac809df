"""The learner under ``torchrun``: process group set-up, batch broadcast, and sharding the model with FSDP2.

Two ways to spread one GRPO step over ranks (``GRPOConfig.data_parallel``):

- ``fsdp`` (the default for more than one rank): ``torch.distributed.fsdp.fully_shard`` per decoder layer and
  once at the root, so parameters, gradients and AdamW state are sharded across ranks (each rank holds 1/N of
  them) and a layer's full parameters exist only while it runs. Every rank must then make the same sequence
  of layer calls, so the trie runs one forward and one backward per unit (``trie_attention="packed"`` on CPU,
  ``"flex"`` on CUDA) and a rank with fewer units runs idle ones (``reconstruct.compute``). Gradients are
  reduce-scattered as a *sum* (divide factor 1), because the GRPO loss is a fixed weighted sum over the batch.
  With ``bf16_autocast`` the layers compute in bfloat16 from fp32 master parameters and reduce gradients in
  fp32 (``MixedPrecisionPolicy``); the optimizer state stays fp32.
- ``replicate``: every rank holds the whole model; gradients are all-reduced (``grpo.all_reduce_gradients``).
  Simpler, fine for models that fit one device several times over.

Either way ``reconstruct.compute`` gives each rank its share of the work units (trie packs or sequences, balanced
by tokens), the summed gradient is the single-process gradient up to float summation order, and every rank takes
the same optimizer step. Backend: gloo on CPU, NCCL on CUDA. Rank 0 alone talks to Postgres and Redis and
publishes weights; checkpoints are written per rank (``checkpoint.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from services.learner.types import TrainingBatch


def init_from_env() -> tuple[int, int]:
    """``(rank, world_size)``; joins the process group when ``torchrun`` launched us with several ranks."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return 0, 1
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        # Followers wait in a broadcast while rank 0 waits for groups: allow long idle periods.
        dist.init_process_group(backend, timeout=timedelta(hours=24))
    return dist.get_rank(), dist.get_world_size()


def broadcast(obj: Any, rank: int) -> Any:
    """Rank 0's ``obj`` on every rank (pickled; batches are token arrays, a few MB)."""
    box = [obj if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a Hugging Face causal LM (also inside a peft wrapper), in order."""
    layers = [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")]
    if not layers:
        raise ValueError(f"no decoder layers found in {type(model).__name__}")
    return layers


def shard_model(model: torch.nn.Module, bf16: bool) -> torch.nn.Module:
    """FSDP2 over the default process group: one shard group per decoder layer, the rest (embeddings, final
    norm, output head) in the root group. Returns ``model`` itself (``fully_shard`` shards in place)."""
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if bf16
        else MixedPrecisionPolicy()
    )
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            # The loss is a fixed weighted sum over the batch; ranks hold disjoint tokens: sum, never average.
            module.set_gradient_divide_factor(1.0)
            module.set_force_sum_reduction_for_comms(True)  # plain SUM: gloo has no PREMUL_SUM
    return model


# --- rank messages: what rank 0 broadcasts to the followers (``loop.Learner.follow``) ---------------------------


@dataclass(frozen=True)
class ResumeFrom:
    """The checkpoint step every rank loads before replaying (0: none; -1: rank 0 cannot resume)."""

    step: int


@dataclass(frozen=True)
class TrainStep:
    """A live step: train on ``batch`` (None: a step without update), help publish, checkpoint."""

    batch: TrainingBatch | None


@dataclass(frozen=True)
class ReplayStep:
    """Retrain a committed step at restart (no publish, no checkpoint)."""

    batch: TrainingBatch | None


@dataclass(frozen=True)
class GatherPublished:
    """Help gather the replayed weights for rank 0's comparison with the published version."""


@dataclass(frozen=True)
class Stop:
    """No more messages: followers return."""


RankMessage = ResumeFrom | TrainStep | ReplayStep | GatherPublished | Stop


def send(message: RankMessage, rank: int) -> None:
    """Rank 0: ``message`` to every other rank."""
    broadcast(message, rank)


def receive(rank: int) -> RankMessage:
    """Ranks > 0: the next message of rank 0."""
    message = broadcast(None, rank)
    if not isinstance(message, ResumeFrom | TrainStep | ReplayStep | GatherPublished | Stop):
        raise TypeError(f"rank {rank}: unexpected message from rank 0: {type(message).__name__}")
    return message
