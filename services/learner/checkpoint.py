"""Learner checkpoints: model, optimizer, RNG states, step and stream position, per rank, every N steps.

Layout: ``checkpoints/<run>/<step:08d>/rank-<r>-of-<w>.pt`` (one ``torch.save`` blob per rank). Each rank writes
the part it holds: a sharded (FSDP2) model's local shards of the trainable parameters and of the AdamW state, a
replicated or single-process model's whole trainable state (a LoRA run's adapter only: the base never changes);
its own RNG states; rank 0 also the ``LearnerState``. A checkpoint counts only when every rank's object exists
(each ``put`` is atomic), so a crash mid-write leaves the previous one in force. This is the one place where
ranks other than 0 touch the object store: gathering the optimizer state onto rank 0 would need the full fp32
state in one process, which sharding exists to avoid.

Cadence (``GRPOConfig.checkpoint_every``) and what a restart does: weights are published and the step committed
every step, but a checkpoint is written only every N steps, after the step's commit. A restarted learner loads
the newest complete checkpoint at or below the last committed step and *replays* the committed steps after it
(``loop.Learner._replay``): each step row records the groups it trained, in order, so the learner reloads them,
rebuilds the same batches and takes the same updates without committing or publishing anything. Nothing is
trained twice (no new step, no new version), nothing is lost (every committed step's groups are replayed), and
the replayed state is checked against the published weights of the last committed version.

Writes do not stall training: the rank copies its tensors (a memory copy, ``snapshot``), then a background thread
serializes, uploads and deletes this rank's checkpoints beyond the newest ``keep`` (``CheckpointWriter``). The
next checkpoint waits for the previous write; restoring model, optimizer and every RNG makes the next step
bit-identical to the one an uninterrupted learner takes.

The blob is read with ``weights_only=False`` because it holds numpy and Python RNG states; it comes only from our
own object store, written by the learner itself.
"""

from __future__ import annotations

import io
import logging
import random
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from shared.objectstore import ObjectNotFound, ObjectStore

log = logging.getLogger(__name__)

_SHARD = re.compile(r"^checkpoints/(?P<run>[^/]+)/(?P<step>\d{8})/rank-(?P<rank>\d+)-of-(?P<world>\d+)\.pt$")


def checkpoint_key(run_id: str, step: int, rank: int = 0, world_size: int = 1) -> str:
    return f"checkpoints/{run_id}/{step:08d}/rank-{rank}-of-{world_size}.pt"


@dataclass(kw_only=True)
class LearnerState:
    """What besides tensors a learner needs to continue exactly where it stopped."""

    step: int = 0
    policy_version: int = 0
    consumed_group_ids: list[str] = field(default_factory=list)
    last_entry_id: str | None = None
    metrics_carry: dict[str, Any] = field(default_factory=dict)


def rng_states() -> dict[str, Any]:
    states = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state()
    return states


def set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state(states["cuda"])


def _local_copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        local = value.to_local() if hasattr(value, "to_local") else value
        return local.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: _local_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_local_copy(v) for v in value]
    return value


def _trainable(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def snapshot(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: LearnerState | None
) -> dict[str, Any]:
    """This rank's checkpoint content, copied to CPU memory (the caller may train on right away)."""
    return {
        "model": _local_copy(_trainable(model)),
        "optimizer": _local_copy(optimizer.state_dict()),
        "rng": rng_states(),
        "state": asdict(state) if state is not None else None,
    }


def _restore_like(saved: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``saved`` (a local shard or a whole tensor) as a tensor of ``like``'s kind: a DTensor for a DTensor."""
    if hasattr(like, "to_local"):
        from torch.distributed.tensor import DTensor

        return DTensor.from_local(
            saved.to(like.to_local().device), like.device_mesh, like.placements, run_check=False
        )
    return saved.to(like.device)


def restore(
    payload: dict[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> LearnerState | None:
    """Load a ``snapshot`` back into ``model``, ``optimizer`` and the RNGs; returns rank 0's learner state."""
    params = _trainable(model)
    missing = sorted(params.keys() - payload["model"].keys())
    if missing:
        raise ValueError(f"checkpoint lacks parameter(s) {', '.join(missing[:5])}")
    with torch.no_grad():
        for name, param in params.items():
            local = param.to_local() if hasattr(param, "to_local") else param
            local.copy_(payload["model"][name])
    saved = payload["optimizer"]
    ordered = [p for group in optimizer.param_groups for p in group["params"]]
    for index, per_param in saved["state"].items():
        param = ordered[int(index)]
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                per_param[key] = _restore_like(value, param)
    optimizer.load_state_dict(saved)
    set_rng_states(payload["rng"])
    return LearnerState(**payload["state"]) if payload["state"] is not None else None


def save_checkpoint(
    store: ObjectStore,
    run_id: str,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: LearnerState,
    rank: int = 0,
    world_size: int = 1,
) -> str:
    """Write this rank's checkpoint now (in the caller's thread)."""
    return _write(
        store, checkpoint_key(run_id, state.step, rank, world_size), snapshot(model, optimizer, state)
    )


def _write(store: ObjectStore, key: str, payload: dict[str, Any]) -> str:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    store.put_bytes(key, buffer.getvalue())
    return key


def load_checkpoint(
    store: ObjectStore,
    run_id: str,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    rank: int = 0,
    world_size: int = 1,
) -> LearnerState:
    """Restore ``model``, ``optimizer`` and the RNGs from this rank's part of step ``step``'s checkpoint; returns
    the learner state (rank 0's; other ranks get the step only). Raises ``ObjectNotFound`` when absent."""
    blob = store.get_bytes(checkpoint_key(run_id, step, rank, world_size))
    payload = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=False)
    state = restore(payload, model, optimizer)
    return state if state is not None else LearnerState(step=step, policy_version=step)


def complete_steps(store: ObjectStore, run_id: str) -> dict[int, int]:
    """Steps with a checkpoint written by every rank → the world size that wrote it."""
    seen: dict[tuple[int, int], set[int]] = {}
    for key in store.list(f"checkpoints/{run_id}/"):
        match = _SHARD.match(key)
        if match and match["run"] == run_id:
            seen.setdefault((int(match["step"]), int(match["world"])), set()).add(int(match["rank"]))
    return {step: world for (step, world), ranks in seen.items() if ranks == set(range(world))}


def newest_checkpoint(store: ObjectStore, run_id: str, at_most: int, world_size: int) -> int:
    """The newest complete checkpoint step at or below ``at_most`` (0 = none: start from the base model).

    Raises ``ValueError`` when the newest one was written by another number of ranks."""
    usable = {s: w for s, w in complete_steps(store, run_id).items() if s <= at_most}
    if not usable:
        return 0
    step = max(usable)
    if usable[step] != world_size:
        raise ValueError(
            f"run {run_id}: checkpoint of step {step} was written by {usable[step]} rank(s); "
            f"restart with {usable[step]} rank(s) (this learner has {world_size})"
        )
    return step


def has_checkpoint(store: ObjectStore, run_id: str, step: int) -> bool:
    try:
        return step in complete_steps(store, run_id)
    except ObjectNotFound:
        return False


class CheckpointWriter:
    """Writes this rank's checkpoints in a background thread and keeps only the newest ``keep`` of them."""

    def __init__(self, store: ObjectStore, run_id: str, rank: int, world_size: int, keep: int) -> None:
        self.store, self.run_id, self.rank, self.world_size, self.keep = store, run_id, rank, world_size, keep
        self._thread: threading.Thread | None = None
        self.last_write_s: float | None = None
        self.error: BaseException | None = None

    def write(self, step: int, payload: dict[str, Any]) -> None:
        self.wait()
        self._thread = threading.Thread(
            target=self._run, args=(step, payload), name=f"checkpoint-{step}", daemon=True
        )
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self, step: int, payload: dict[str, Any]) -> None:
        started = time.perf_counter()
        try:
            _write(self.store, checkpoint_key(self.run_id, step, self.rank, self.world_size), payload)
            self._prune(step)
        except BaseException as exc:  # noqa: BLE001 - a failed write leaves the previous checkpoint in force
            self.error = exc
            log.error("checkpoint of step %s failed: %s", step, exc, extra={"run_id": self.run_id})
        self.last_write_s = time.perf_counter() - started

    def _prune(self, newest: int) -> None:
        mine = sorted(
            int(m["step"])
            for key in self.store.list(f"checkpoints/{self.run_id}/")
            if (m := _SHARD.match(key)) and int(m["rank"]) == self.rank and int(m["world"]) == self.world_size
        )
        for step in [s for s in mine if s <= newest][: -self.keep]:
            self.store.delete(checkpoint_key(self.run_id, step, self.rank, self.world_size))
