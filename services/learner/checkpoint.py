"""Learner checkpoints in the object store: model, optimizer, RNG states, step, consumed stream positions.

Layout: ``checkpoints/<run>/<step:08d>/state.pt`` (one ``torch.save`` blob). A checkpoint is written *before* the
step's database transaction commits; the ``steps`` table is the commit point. On restart the learner loads the
checkpoint of the run's last committed step (``steps.step``), so an uncommitted checkpoint (a crash between the
write and the commit) is never resumed from — it is overwritten when that step is redone. Restoring model,
optimizer and every RNG makes the next step bit-identical to the step an uninterrupted learner would have taken.

The blob is read with ``weights_only=False`` because it holds numpy and Python RNG states; it comes only from our
own object store, written by the learner itself.
"""

from __future__ import annotations

import io
import random
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from shared.objectstore import ObjectNotFound, ObjectStore


def checkpoint_key(run_id: str, step: int) -> str:
    return f"checkpoints/{run_id}/{step:08d}/state.pt"


@dataclass
class LearnerState:
    """What besides tensors a learner needs to continue exactly where it stopped."""

    step: int = 0
    policy_version: int = 0
    consumed_group_ids: list[str] = field(default_factory=list)
    last_entry_id: str | None = None
    metrics_carry: dict[str, Any] = field(default_factory=dict)


def rng_states() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])


def save_checkpoint(
    store: ObjectStore,
    run_id: str,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    state: LearnerState,
) -> str:
    buffer = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "rng": rng_states(),
            "state": asdict(state),
        },
        buffer,
    )
    key = checkpoint_key(run_id, state.step)
    store.put_bytes(key, buffer.getvalue())
    return key


def load_checkpoint(
    store: ObjectStore,
    run_id: str,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
) -> LearnerState:
    """Restore ``model``, ``optimizer`` and the RNGs from step ``step``'s checkpoint; returns the learner state.

    Raises ``ObjectNotFound`` when that step has no checkpoint.
    """
    key = checkpoint_key(run_id, step)
    blob = store.get_bytes(key)
    payload = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=False)
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    set_rng_states(payload["rng"])
    return LearnerState(**payload["state"])


def has_checkpoint(store: ObjectStore, run_id: str, step: int) -> bool:
    try:
        return store.exists(checkpoint_key(run_id, step))
    except ObjectNotFound:
        return False
