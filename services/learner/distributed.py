"""Data parallelism for the learner under ``torchrun``: process group set-up and batch broadcast.

Every rank holds the whole model and the same batch; ``reconstruct.compute`` gives each rank its share of the
work units (trie packs or sequences, balanced by tokens), and ``grpo.grpo_step`` sums the gradients over ranks
before the optimizer step. The GRPO loss is a fixed weighted sum over the batch's tokens, so the summed gradient
is the single-process gradient up to float summation order, and every rank takes the same optimizer step.
Backend: gloo on CPU, NCCL on CUDA. Rank 0 alone talks to Postgres, Redis and the object store.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


def init_from_env() -> tuple[int, int]:
    """``(rank, world_size)``; joins the process group when ``torchrun`` launched us with several ranks."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return 0, 1
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        # Followers wait in a broadcast while rank 0 waits for groups: allow long idle periods.
        dist.init_process_group(backend, timeout=timedelta(hours=24))
    return dist.get_rank(), dist.get_world_size()


def broadcast(obj: Any, rank: int) -> Any:
    """Rank 0's ``obj`` on every rank (pickled; batches are token arrays, a few MB)."""
    box = [obj if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]
