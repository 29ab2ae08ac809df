"""The learner process of an SFT run (``runs.kind = 'sft'``): epochs of cross-entropy on recorded rollouts,
one committed step and one published version per batch (docs/design.md#supervised-fine-tuning).

Owned state and concurrency: one ``SFTLearner`` per run, one thread, one process (an SFT run has no torchrun
ranks). It owns the model, the optimizer, the RNGs and the step counter. Nothing else writes an SFT run's
``steps`` and ``weights`` rows; the api sets ``stopping`` and the scheduler ``stopped`` (it has no rollouts to
cancel); this learner sets ``completed`` in its last step's commit.

One step, in order (the core, the schedule and the loss, is ``sft.py``):
  1. the step's rollouts (``sft.step_batch``: a seeded shuffle per epoch), loaded and checked
     (``loader.load_rollouts``);
  2. the update (``sft.sft_step``), through the run's reconstruction strategy;
  3. the version's weights in the served dtype (``publish.py``), exactly as a GRPO step writes them, so an eval
     (``harnessrl eval --run``) or a GRPO run's init serves them the same way;
  4. one transaction: the ``steps`` row (``StepRecord``), the ``weights`` row, ``runs.policy_version`` — and,
     after the last step, ``runs.status = 'completed'``. This is the step's commit point;
  5. TensorBoard scalars (``train/loss``, tokens, tokens/s), and every ``grpo.checkpoint_every`` steps (and after
     the last) a checkpoint from a copy, written in the background (``checkpoint.py``).

No ``weights`` event is announced: an SFT run never holds the inference pool (it samples nothing); its versions
are served when an eval or a training run asks for them.

Restart: like the GRPO learner, load the newest complete checkpoint at or below the last committed step, replay
the committed steps after it (the schedule is a pure function of the config, so the batches are the same) without
committing or publishing, check the replayed weights against the last published version's sha256, and go on.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from safetensors.torch import save
from sqlalchemy import select, update

from services.learner import grpo, sft
from services.learner.checkpoint import (
    CheckpointWriter,
    LearnerState,
    load_checkpoint,
    newest_checkpoint,
    snapshot,
)
from services.learner.distributed import init_from_env
from services.learner.loader import load_rollouts, read_learner_run
from services.learner.policy import build_policy, served_dtype
from services.learner.publish import PublishedWeights, published_tensors, put_weights
from services.learner.reconstruct import resolve_bf16
from services.learner.types import TrainingBatch
from shared.db import make_engine, session_factory, session_scope
from shared.models import Run, Step, Weight
from shared.objectstore import open_store
from shared.run_config import RunConfigError, SFTConfig
from shared.settings import Settings
from shared.statuses import RunKind, RunStatus
from shared.step_record import StepRecord, UpdateFigures
from shared.tensorboard import ScalarLog
from shared.trajectory import InconsistentTrajectory

log = logging.getLogger(__name__)


class SFTError(RuntimeError):
    """The SFT learner cannot start or continue; the message says why."""


def is_sft_run(settings: Settings, run_id: str) -> bool:
    """Whether ``run_id`` is an SFT run (``harnessrl serve learner`` picks the learner by it)."""
    engine = make_engine(settings.database_url, pool_size=1)
    try:
        with engine.connect() as conn:
            return conn.execute(select(Run.kind).where(Run.id == run_id)).scalar() == RunKind.SFT
    finally:
        engine.dispose()


def tensorboard_scalars(record: StepRecord, epoch: int) -> dict[str, float | None]:
    """An SFT step's figures as ``train/<name>`` scalars beside its row (``shared/tensorboard.py``)."""
    u = record.update
    return {
        "train/loss": u.loss, "train/epoch": float(epoch), "train/loss_tokens": u.loss_tokens,
        "train/tokens_computed": u.tokens_computed,
        "train/tokens_per_s": u.tokens_computed / u.update_s if u.update_s else None,
        "train/grad_norm": u.grad_norm, "train/step_time_s": u.update_s, "train/load_s": record.load_s,
        "train/publish_s": record.publish_s,
    }  # fmt: skip


class SFTLearner:
    """One SFT run's learner: schedule (``sft.step_batch``), load, update (``sft.sft_step``), publish, commit."""

    def __init__(self, settings: Settings, run_id: str) -> None:
        self.settings = settings
        self.run_id = run_id
        self.engine = make_engine(settings.database_url)
        self.sessions = session_factory(self.engine)
        self.store = open_store(settings)
        self.stopping = False
        rank, world_size = init_from_env()
        if world_size > 1:
            raise SFTError(f"run {run_id}: an SFT run trains in one process; start it without torchrun")
        last_step = self._read_run()
        self._build_model()
        self.checkpoints = CheckpointWriter(self.store, run_id, 0, 1, self.config.keep_checkpoints)
        self.state = LearnerState()
        self.tensorboard = ScalarLog(settings, self.store, writer="learner")
        self.replay_report: dict[str, Any] | None = None
        self._resume(last_step)

    def _read_run(self) -> int:
        with session_scope(self.sessions) as session:
            try:
                run_config, last_step = read_learner_run(session, self.run_id, RunKind.SFT)
            except RunConfigError as exc:
                raise SFTError(str(exc)) from None
        assert run_config.sft is not None  # kind 'sft' is written from the section (models.run_kind)
        self.sft: SFTConfig = run_config.sft
        self.config = sft.optimizer_config(run_config.grpo, self.sft)
        self.lora = run_config.lora
        self.model_dir = Path(run_config.model_dir or self.settings.resolved_model_dir)
        if not (self.model_dir / "config.json").exists():
            raise SFTError(f"model directory {self.model_dir} has no config.json")
        return last_step

    def _build_model(self) -> None:
        torch.manual_seed(self.config.seed)
        np.random.seed(self.config.seed)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.bf16 = resolve_bf16(self.config.bf16_autocast, device)
        self.model = build_policy(
            self.model_dir, lora=self.lora, activation_checkpointing=self.config.activation_checkpointing
        )
        self.publish_dtype = served_dtype(self.model_dir)
        self.vocab_size = int(cast(Any, self.model).config.vocab_size)
        self.optimizer = grpo.make_optimizer(self.model, self.config)

    # --- resuming --------------------------------------------------------------------------------------------
    def _resume(self, last_step: int) -> None:
        """Newest complete checkpoint at or below the last committed step, then replay the steps after it."""
        if not last_step:
            return
        try:
            start = newest_checkpoint(self.store, self.run_id, last_step, 1)
        except ValueError as exc:
            raise SFTError(str(exc)) from None
        if start:
            self.state = load_checkpoint(self.store, self.run_id, start, self.model, self.optimizer)
        started = time.perf_counter()
        for step in range(start + 1, last_step + 1):
            self._update(self._batch(step)[0])
        self.state = LearnerState(step=last_step, policy_version=last_step)
        with session_scope(self.sessions) as session:
            published = session.scalar(
                select(Weight.sha256).where(Weight.run_id == self.run_id, Weight.version == last_step)
            )
        sha = hashlib.sha256(save(published_tensors(self.model, self.publish_dtype))).hexdigest()
        self.replay_report = {
            "from_checkpoint": start,
            "steps": list(range(start + 1, last_step + 1)),
            "seconds": time.perf_counter() - started,
            "matches_published": sha == published,
        }
        if sha != published:
            log.warning(
                "replayed weights differ from the published version %s",
                last_step,
                extra={"run_id": self.run_id},
            )
        replayed = f"replayed steps {start + 1}..{last_step}" if start < last_step else "nothing to replay"
        print(
            f"resumed SFT run {self.run_id} from checkpoint {start}, {replayed} in "
            f"{self.replay_report['seconds']:.1f}s; weights match version {last_step}: {sha == published}",
            flush=True,
        )

    # --- one step --------------------------------------------------------------------------------------------
    def _batch(self, step: int) -> tuple[TrainingBatch, int, float]:
        """Step ``step``'s batch, its epoch and the seconds its load took."""
        planned = sft.step_batch(self.sft, step)
        started = time.perf_counter()
        with session_scope(self.sessions) as session:
            try:
                rollouts = load_rollouts(session, self.store, planned.rollout_ids, self.vocab_size)
            except InconsistentTrajectory as exc:
                raise SFTError(f"run {self.run_id}, step {step}: {exc}") from None
        return TrainingBatch(rollouts), planned.epoch, time.perf_counter() - started

    def _update(self, batch: TrainingBatch) -> dict[str, float]:
        return sft.sft_step(self.model, self.optimizer, batch, self.config)

    def _publish(self, version: int) -> PublishedWeights:
        published = put_weights(self.store, self.run_id, version, self.model, self.publish_dtype)
        assert published is not None  # one process: rank 0
        return published

    def _commit(self, record: StepRecord, published: PublishedWeights, last: bool) -> None:
        """The step's commit point: its row, its weights row, the run's version (and status after the last)."""
        with session_scope(self.sessions) as session:
            session.add(Step(run_id=self.run_id, **record.columns()))
            session.add(
                Weight(
                    run_id=self.run_id,
                    version=record.policy_version,
                    object_key=published.object_key,
                    status="published",
                    size_bytes=published.size_bytes,
                    sha256=published.sha256,
                )
            )
            values: dict[str, Any] = {"policy_version": record.policy_version}
            if last:
                values["status"] = RunStatus.COMPLETED
            session.execute(
                update(Run).where(Run.id == self.run_id, Run.status == RunStatus.RUNNING).values(**values)
            )

    def train_step(self) -> StepRecord:
        """Train, publish and commit the next step; then TensorBoard and the checkpoint, which need the commit."""
        step = self.state.step + 1
        started = time.perf_counter()
        batch, epoch, load_s = self._batch(step)
        metrics = self._update(batch)
        publish_started = time.perf_counter()
        published = self._publish(step)
        publish_s = time.perf_counter() - publish_started
        record = StepRecord(
            step=step,
            policy_version=step,
            update=UpdateFigures.from_metrics(metrics),
            kl=None,
            step_time_s=time.perf_counter() - started,
            policy_lag_mean=None,
            strategy=self.config.strategy,
            compute_dtype="bfloat16" if self.bf16 else "float32",
            load_s=load_s,
            load_last_group_s=load_s,
            publish_s=publish_s,
            weights_sha256=published.sha256,
            published_bytes=published.size_bytes,
            checkpoint_write_s_previous=self.checkpoints.last_write_s,
        )
        last = step == self.sft.steps
        self._commit(record, published, last)
        self.state = LearnerState(step=step, policy_version=step)
        self.tensorboard.write(self.run_id, step, tensorboard_scalars(record, epoch))
        if last or step % self.config.checkpoint_every == 0:
            self.checkpoints.write(step, snapshot(self.model, self.optimizer, self.state))
        log.info(
            "SFT step committed", extra={"run_id": self.run_id, "step": step, "loss": record.update.loss}
        )
        return record

    # --- the loop --------------------------------------------------------------------------------------------
    def _run_status(self) -> str | None:
        with session_scope(self.sessions) as session:
            return session.scalar(select(Run.status).where(Run.id == self.run_id))

    def run(self, max_steps: int | None = None, idle_exit_s: float | None = None) -> int:
        """Train the remaining steps, until the run is stopped or ``max_steps`` steps were taken
        (``idle_exit_s`` is the GRPO learner's option; an SFT learner never waits for data)."""
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        steps = 0
        while (
            self.state.step < self.sft.steps
            and not self.stopping
            and (max_steps is None or steps < max_steps)
        ):
            if self._run_status() != RunStatus.RUNNING:
                print(f"run {self.run_id} is no longer running; SFT learner exits", flush=True)
                break
            record = self.train_step()
            steps += 1
            u = record.update
            print(
                f"step {record.step}/{self.sft.steps} version {record.policy_version} loss {u.loss:.4f} "
                f"tokens {int(u.tokens_computed)} ({int(u.loss_tokens)} trained) time {u.update_s:.2f}s",
                flush=True,
            )
        if self.state.step >= self.sft.steps:
            self._complete()
        return steps

    def _complete(self) -> None:
        """A run whose every step is committed but whose status was not set (a crash between the last commit's
        effects, or rows of an older version) is ``completed``."""
        with session_scope(self.sessions) as session:
            session.execute(
                update(Run)
                .where(Run.id == self.run_id, Run.status == RunStatus.RUNNING)
                .values(status=RunStatus.COMPLETED)
            )

    def close(self) -> None:
        self.checkpoints.wait()
        self.tensorboard.close()
        self.engine.dispose()
