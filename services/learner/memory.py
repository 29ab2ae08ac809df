"""Memory of a learner step: the peak during it (reported on every step) and the bytes a model's state holds.

``PeakMemory`` measures a block: on CUDA the allocator's peak (``max_memory_allocated``, reset at the start); on CPU
the process's peak resident memory, sampled every 5 ms by a thread (freed heap is handed back to the OS first, so
an earlier step's leftovers do not hide this one's peak). ``state_bytes`` counts what parameters, gradients and
optimizer state hold on this rank (a sharded tensor counts its local shard only).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import torch


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakMemory:
    """``with PeakMemory(device) as m: ...`` → ``m.peak`` (bytes) and ``m.above_start``."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start = self.peak = torch.cuda.memory_allocated(self.device)
            return self
        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        self.start = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            self.peak = torch.cuda.max_memory_allocated(self.device)
            return
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def above_start(self) -> int:
        return self.peak - self.start


def _local_bytes(tensor: torch.Tensor) -> int:
    local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
    return int(local.numel() * local.element_size())


def state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, int]:
    """Bytes of parameters, gradients and optimizer state held by this rank."""
    params = sum(_local_bytes(p) for p in model.parameters())
    grads = sum(_local_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    optim = 0
    if optimizer is not None:
        for state in optimizer.state.values():
            optim += sum(
                _local_bytes(v) for v in state.values() if isinstance(v, torch.Tensor) and v.dim() > 0
            )
    return {"params": params, "grads": grads, "optimizer": optim, "total": params + grads + optim}
