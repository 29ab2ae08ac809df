"""``Trainer.step``: one GRPO step on a sampling step's groups, without I/O — advantages, the update, the
step's ``StepRecord`` (``shared/step_record.py``). The orchestrator (``loop.py``) collects the groups before it and
publishes, commits and measures after it.

Owned state: the model, its optimizer and the reference model. Under ``torchrun`` rank 0 sends each batch to the
followers (``distributed.TrainStep``) before its update, so every rank takes the same optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from services.learner import grpo
from services.learner.collect import Collected
from services.learner.distributed import RankMessage, ReplayStep, TrainStep, send
from services.learner.types import TrainingBatch
from shared.run_config import GRPOConfig
from shared.step_record import SetAside, StepRecord, UpdateFigures


@dataclass(kw_only=True)
class Trainer:
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    reference: torch.nn.Module | None
    config: GRPOConfig
    bf16: bool
    rank: int = 0
    world_size: int = 1

    def step(self, collected: Collected, *, step: int, learner_version: int) -> StepRecord:
        """Train on ``collected``'s trainable groups (or, when none has signal, take no update) and describe it:
        the record of step ``step`` into version ``learner_version + 1``, without what publishing, the commit
        and the timing add (``loop.Learner.train``)."""
        rollouts = [r for g in collected.trainable for r in g.rollouts]
        lag_mean, lag_max = 0.0, 0
        if rollouts:
            batch = TrainingBatch(grpo.with_advantages(rollouts, self.config))
            update = self.update(batch, TrainStep(batch))
            token_lags = learner_version - batch.per_loss_token()["policy_version"]
            if len(token_lags):
                lag_mean, lag_max = float(token_lags.mean()), int(token_lags.max())
        else:
            # A sampling step whose groups all lack signal (no reward variance, stale, or set aside): no update,
            # but still one committed step and one version, so versions count steps and the scheduler and
            # inference move on exactly as after a real update (the published weights are unchanged).
            self._send(TrainStep(None))
            update = untrained_figures(collected.untrained_rewards)
        return StepRecord(
            step=step,
            policy_version=learner_version + 1,
            update=update,
            kl=update.kl_reference if self.reference is not None else update.kl_behavior,
            step_time_s=None,
            policy_lag_mean=lag_mean,
            policy_lag_max=lag_max,
            groups_trained=len(collected.trainable),
            groups_redelivered=len(collected.redelivered),
            trained_group_ids=tuple(g.group_id for g in collected.trainable),
            stale_group_ids=tuple(collected.stale),
            set_aside=tuple(SetAside(group_id=g, reason=r) for g, r in collected.set_aside),
            strategy=self.config.strategy,
            compute_dtype="bfloat16" if self.bf16 else "float32",
            cut_fraction=sum(1 for r in rollouts if r.calls_cut) / len(rollouts) if rollouts else 0.0,
            load_s=collected.load_s,
            load_last_group_s=collected.load_last_group_s,
        )

    def update(self, batch: TrainingBatch, message: RankMessage | None = None) -> UpdateFigures:
        """One GRPO update on ``batch`` (advantages set); rank 0 first sends ``message`` to the followers."""
        if message is not None:
            self._send(message)
        result = grpo.grpo_step(
            self.model,
            self.optimizer,
            batch,
            self.config,
            self.reference,
            rank=self.rank,
            world_size=self.world_size,
        )
        return UpdateFigures.from_metrics(result.metrics)

    def replay(self, batch: TrainingBatch | None) -> None:
        """Retrain a committed step at restart (rank 0; the followers get a ``ReplayStep``)."""
        if batch is None:
            self._send(ReplayStep(None))
        else:
            self.update(batch, ReplayStep(batch))

    def _send(self, message: RankMessage) -> None:
        if self.world_size > 1:
            send(message, self.rank)


def untrained_figures(rewards: list[float]) -> UpdateFigures:
    """The update figures of a step that trained nothing: zeros, and the rewards of its untrained groups."""
    r = np.asarray(rewards, np.float64)
    return UpdateFigures(
        reward_mean=float(r.mean()) if len(r) else 0.0,
        reward_std=float(r.std()) if len(r) else 0.0,
        no_update=True,
    )
