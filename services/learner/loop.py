"""The learner process of one run: read complete groups, train a GRPO step, commit, publish (docs/design.md#learner).

Owned state and concurrency: one ``Learner`` per run, one thread. It owns the model, the optimizer, the RNGs and
``LearnerState`` (step, policy version, recently consumed groups). Graders append to the run's ``groups`` stream;
the learner reads it as a member of the consumer group ``learner`` and acks an entry only after the step (or the
drop decision) that used it has committed.

One step, in order:
  1. collect one sampling step: the run config's ``groups_per_step`` newly decided groups (the groups the api
     schedules per sampling step). A group already ``consumed`` (a redelivered entry) is only acked; a group whose oldest
     token is more than ``max_policy_lag`` versions old (the run's ``grpo.max_policy_lag``, which also bounds how far
     the scheduler lets sampling run ahead; unset, ``Settings.max_policy_lag``) is dropped (stale); a group with zero
     reward variance carries no GRPO signal and is counted, not trained; a group whose token arrays are missing or
     inconsistent is set aside with its reason (``loader.py``). The rest is the batch. Each loss token is weighed
     against its own behaviour logprob (``grpo.py``), so a rollout whose calls span a weight swap trains each call
     against the version that sampled it.
  2. GRPO update (``grpo.grpo_step``) with the run's reconstruction strategy — or, when no group has signal,
     no update: the step still commits and publishes a version (unchanged weights), so every sampling step
     yields exactly one learner step and one policy version, and the run moves on.
  3. write the version's weights in the served dtype (``publish.py``: ``weights/<run>/<version>/model.safetensors``,
     or a LoRA run's adapter under ``adapters/<run>/<version>/``);
  4. one transaction: ``steps`` row with the step's ``StepRecord`` (``shared/step_record.py``: among others the
     ids of the groups it trained, in order, and the policy lag of its trained tokens), ``weights`` row, groups →
     ``consumed`` (set-aside ones → ``failed``, the reason on each rollout's ``RolloutMeta.learner_set_aside``),
     ``runs.policy_version``. This commit is the step's commit point;
  5. ack the stream entries, then announce the ``weights`` event. A crash between commit and announcement is healed
     at start-up: the learner re-announces its current version (the updater ignores versions it already serves);
  6. the step's window and busy fractions, measured now that its commit time is known (``timing.py``);
  7. TensorBoard scalars, and every ``checkpoint_every`` steps a checkpoint from a copy, written in the background
     (``checkpoint.py``).

Step 1 lives in ``collect.py``, step 2 in ``trainer.py`` (``Trainer.step``: no I/O), the rest here, one small
function each.

Restart: the learner loads the newest complete checkpoint at or below the last committed step and replays the
committed steps after it from their recorded groups (``_replay``) — no commit, no publish, no stream reads — so
no group is lost or trained twice and no version number is published twice; then it checks the replayed weights
against the last published version's sha256. A failure after the optimizer step and before the commit leaves
in-memory state ahead of the database; the learner then stops (the supervisor restarts it) rather than guess.

Under ``torchrun`` (``distributed.py``) rank 0 does all of the above; it sends each batch before its step
(``distributed.TrainStep``), every rank computes its share (the model sharded by FSDP2, or replicated), every rank
helps gather the published tensors and writes its own checkpoint shard, and ranks > 0 only ``follow``.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import socket
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from safetensors.torch import save
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from services.learner import grpo
from services.learner.checkpoint import (
    CheckpointWriter,
    LearnerState,
    load_checkpoint,
    newest_checkpoint,
    snapshot,
)
from services.learner.collect import Collected, GroupCollector
from services.learner.distributed import (
    GatherPublished,
    ReplayStep,
    ResumeFrom,
    Stop,
    TrainStep,
    broadcast,
    init_from_env,
    receive,
    send,
)
from services.learner.loader import GroupSetAside, load_group, read_learner_run
from services.learner.policy import build_policy, served_dtype
from services.learner.publish import (
    PublishedWeights,
    published_tensors,
    put_weights,
    read_published,
    weights_key,
)
from services.learner.reconstruct import resolve_bf16
from services.learner.timing import record_timing
from services.learner.trainer import Trainer
from services.learner.types import TrainingBatch
from shared.adapters import adapter_key
from shared.db import make_engine, session_factory, session_scope
from shared.events import GroupEntry, GroupStreamConsumer, connect, publish_weights
from shared.models import Group, Run, Step, Weight
from shared.models import Rollout as RolloutRow
from shared.objectstore import ObjectNotFound, open_store
from shared.rollout_records import set_aside
from shared.run_config import RunConfigError
from shared.settings import Settings
from shared.statuses import GroupStatus, RunKind
from shared.step_record import StepRecord
from shared.tensorboard import ScalarLog

log = logging.getLogger(__name__)

RECENT_CONSUMED = 1000


class LearnerError(RuntimeError):
    """The learner cannot start or continue; the message says why."""


def tensorboard_scalars(record: StepRecord) -> dict[str, float | None]:
    """The step's figures written to TensorBoard as ``train/<name>`` (shared/tensorboard.py), beside its row."""
    u = record.update
    return {
        "train/loss": u.loss, "train/reward_mean": u.reward_mean, "train/reward_std": u.reward_std,
        "train/kl": u.kl_reference, "train/kl_behavior": u.kl_behavior, "train/clip_fraction": u.clip_fraction,
        "train/tokens_computed": u.tokens_computed, "train/loss_tokens": u.loss_tokens,
        "train/step_time_s": u.update_s, "train/load_s": record.load_s, "train/publish_s": record.publish_s,
        "train/cut_fraction": record.cut_fraction,
    }  # fmt: skip


class Learner:
    """The orchestrator of one run's learner: collect (``collect.py``), step (``trainer.py``), commit."""

    def __init__(self, settings: Settings, run_id: str, consumer: str | None = None) -> None:
        self.settings = settings
        self.run_id = run_id
        self.engine = make_engine(settings.database_url)
        self.sessions = session_factory(self.engine)
        self.store = open_store(settings)
        self.redis = connect(settings.redis_url)
        self.stopping = False
        self.rank, self.world_size = init_from_env()
        last_step = self._read_run()
        self._build_model()
        self.checkpoints = CheckpointWriter(
            self.store, run_id, self.rank, self.world_size, self.config.keep_checkpoints
        )
        self.state = LearnerState()
        self.tensorboard = ScalarLog(settings, self.store, writer="learner")
        self.replay_report: dict[str, Any] | None = None
        self.carry = {"groups_stale": 0, "groups_zero_variance": 0, "groups_set_aside": 0}
        self._resume(last_step)
        if self.rank > 0:
            return  # followers only train on what rank 0 sends
        self.consumer = GroupStreamConsumer(
            self.redis, run_id, consumer or f"learner-{socket.gethostname()}", claim_idle_ms=60_000
        )
        backlog: list[GroupEntry] = self.consumer.own_pending(10_000) + self.consumer.claim_stale(10_000)
        self.collector = GroupCollector(
            run_id=run_id,
            sessions=self.sessions,
            store=self.store,
            consumer=self.consumer,
            config=self.config,
            groups_per_step=self.groups_per_step,
            max_policy_lag=self.max_policy_lag,
            vocab_size=self.vocab_size,
            stopping=lambda: self.stopping,
            backlog=backlog,
        )
        if self.state.policy_version > 0:
            publish_weights(self.redis, run_id, self.state.policy_version, self._weights_key())

    def _read_run(self) -> int:
        """The run's config into ``self``; the last committed step."""
        with session_scope(self.sessions) as session:
            try:
                run_config, last_step = read_learner_run(session, self.run_id, RunKind.TRAIN)
            except RunConfigError as exc:
                raise LearnerError(str(exc)) from None
        self.config = run_config.grpo
        self.lora = run_config.lora
        self.init = run_config.init
        self.groups_per_step = run_config.groups_per_step
        # One bound for the scheduler (how far sampling runs ahead) and this drop; unset: on-policy sampling, and
        # the service's bound for what an on-policy run can still leave behind (shared/run_config.py).
        self.max_policy_lag = self.config.drop_lag(self.settings.max_policy_lag)
        self.sampling_lag = self.config.sampling_lag
        self.model_dir = Path(run_config.model_dir or self.settings.resolved_model_dir)
        if not (self.model_dir / "config.json").exists():
            raise LearnerError(f"model directory {self.model_dir} has no config.json")
        return last_step

    def _build_model(self) -> None:
        """Seed the RNGs; the policy (on the GPU where there is one), its optimizer, the reference, the trainer."""
        torch.manual_seed(self.config.seed)
        np.random.seed(self.config.seed)
        sharded = self.world_size > 1 and self.config.data_parallel == "fsdp"
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.bf16 = resolve_bf16(self.config.bf16_autocast, device)
        init_state = self._init_state()
        self.model = build_policy(
            self.model_dir,
            init_state=init_state,
            lora=self.lora,
            activation_checkpointing=self.config.activation_checkpointing,
            shard=sharded,
            bf16=self.bf16,
        )
        self.publish_dtype = served_dtype(self.model_dir)
        self.vocab_size = int(cast(Any, self.model).config.vocab_size)
        self.optimizer = grpo.make_optimizer(self.model, self.config)
        self.reference = None
        if self.config.kl_coef:
            self.reference = build_policy(
                self.model_dir, init_state=init_state, shard=sharded, bf16=self.bf16
            ).eval()
        self.trainer = Trainer(
            model=self.model,
            optimizer=self.optimizer,
            reference=self.reference,
            config=self.config,
            bf16=self.bf16,
            rank=self.rank,
            world_size=self.world_size,
        )

    def _init_state(self) -> dict[str, torch.Tensor] | None:
        """The weights of the run's ``init`` version (another run's, ``RunSpec.init``), or None: the base."""
        if self.init is None or not self.init.version:
            return None
        with session_scope(self.sessions) as session:
            row = session.scalars(
                select(Weight).where(Weight.run_id == self.init.run_id, Weight.version == self.init.version)
            ).first()
            key, sha256 = (row.object_key, row.sha256) if row is not None else (None, None)
        if key is None:
            raise LearnerError(f"init {self.init}: no such published version")
        try:
            return read_published(self.store, key, sha256)
        except (ValueError, ObjectNotFound) as exc:
            raise LearnerError(f"init {self.init}: {exc}") from None

    # --- resuming --------------------------------------------------------------------------------------------
    def _resume(self, last_step: int) -> None:
        """Newest complete checkpoint at or below the last committed step, then replay the steps after it."""
        start = 0
        if self.rank == 0 and last_step:
            try:
                start = newest_checkpoint(self.store, self.run_id, last_step, self.world_size)
            except ValueError as exc:
                start = -1
                error = str(exc)
        if self.world_size > 1:
            start = broadcast(ResumeFrom(start), self.rank).step
        if start < 0:
            raise LearnerError(error if self.rank == 0 else "rank 0 cannot resume this run")
        if start:
            self.state = load_checkpoint(
                self.store, self.run_id, start, self.model, self.optimizer, self.rank, self.world_size
            )
        if self.rank == 0:
            self._replay(start, last_step)
        elif last_step:
            self.follow()  # rank 0 sends the replayed batches, then Stop

    def _replay_plan(self, after: int, last_step: int) -> tuple[list[StepRecord], str | None]:
        """The committed steps after ``after``, and the sha256 of the last published version."""
        with session_scope(self.sessions) as session:
            rows = session.scalars(
                select(Step).where(Step.run_id == self.run_id, Step.step > after).order_by(Step.step)
            ).all()
            published = session.scalars(
                select(Weight.sha256).where(Weight.run_id == self.run_id, Weight.version == last_step)
            ).first()
        return [StepRecord.from_row(row) for row in rows], published

    def _replay(self, after: int, last_step: int) -> None:
        """Rank 0: retrain committed steps ``after+1 .. last_step`` from their recorded groups."""
        if last_step <= after:
            if self.world_size > 1 and last_step:
                send(Stop(), self.rank)
            return
        started = time.perf_counter()
        plan, published = self._replay_plan(after, last_step)
        try:
            for record in plan:
                if record.trained_group_ids is None:
                    raise LearnerError(
                        f"run {self.run_id}: step {record.step} does not record its groups; cannot replay it "
                        f"from checkpoint {after}"
                    )
                group_ids = list(record.trained_group_ids)
                self.trainer.replay(self._replay_batch(group_ids, record.policy_version - 1))
                self.state = LearnerState(
                    step=record.step,
                    policy_version=record.policy_version,
                    consumed_group_ids=(self.state.consumed_group_ids + group_ids)[-RECENT_CONSUMED:],
                    last_entry_id=self.state.last_entry_id,
                )
            if self.world_size > 1:
                send(GatherPublished(), self.rank)
            blob = save(published_tensors(self.model, self.publish_dtype))
        finally:
            if self.world_size > 1:
                send(Stop(), self.rank)
        self._report_replay(after, last_step, [r.step for r in plan], started, blob, published)

    def _report_replay(
        self, after: int, last_step: int, steps: list[int], started: float, blob: bytes, published: str | None
    ) -> None:
        sha = hashlib.sha256(blob).hexdigest()
        self.replay_report = {
            "from_checkpoint": after,
            "steps": steps,
            "seconds": time.perf_counter() - started,
            "matches_published": sha == published,
        }
        if sha != published:
            log.warning(
                "replayed weights differ from the published version %s",
                last_step,
                extra={"run_id": self.run_id},
            )
        print(
            f"resumed run {self.run_id} from checkpoint {after}, replayed steps {after + 1}..{last_step} in "
            f"{self.replay_report['seconds']:.1f}s; weights match version {last_step}: {sha == published}",
            flush=True,
        )

    def _replay_batch(self, group_ids: list[str], learner_version: int) -> TrainingBatch | None:
        rollouts = []
        with session_scope(self.sessions) as session:
            for group_id in group_ids:
                try:
                    loaded = load_group(session, self.store, group_id, learner_version, self.vocab_size)
                except GroupSetAside as exc:
                    raise LearnerError(f"cannot replay group {group_id}: {exc.reason}") from None
                rollouts += list(loaded.rollouts)
        return TrainingBatch(grpo.with_advantages(rollouts, self.config)) if rollouts else None

    def _weights_key(self) -> str:
        if self.lora is not None:
            return adapter_key(self.run_id, self.state.policy_version)
        return weights_key(self.run_id, self.state.policy_version)

    # --- after the update: publish, checkpoint ---------------------------------------------------------------
    def _publish_weights(self, state: LearnerState) -> PublishedWeights | None:
        """Every rank: gather the version's tensors; rank 0 writes them to the object store (``publish.py``)."""
        return put_weights(
            self.store, self.run_id, state.policy_version, self.model, self.publish_dtype, self.rank
        )

    def _maybe_checkpoint(self, state: LearnerState) -> float:
        """After the step's commit: copy this rank's state and write it in the background; the copy's seconds."""
        if state.step % self.config.checkpoint_every:
            return 0.0
        started = time.perf_counter()
        self.checkpoints.write(
            state.step, snapshot(self.model, self.optimizer, state if self.rank == 0 else None)
        )
        return time.perf_counter() - started

    # --- reading ---------------------------------------------------------------------------------------------
    def collect(self, wait_s: float, fill_timeout_s: float = 3600.0) -> Collected:
        """One sampling step's groups (``collect.GroupCollector.collect``)."""
        return self.collector.collect(self.state, wait_s, fill_timeout_s)

    def run_over(self) -> bool:
        return self.collector.run_over()

    # --- committing ------------------------------------------------------------------------------------------
    def _mark_groups(self, session: Session, collected: Collected, now: datetime) -> None:
        if done := collected.consumed:
            session.execute(
                update(Group).where(Group.id.in_(done)).values(status=GroupStatus.CONSUMED, consumed_at=now)
            )
        for group_id, reason in collected.set_aside:
            session.execute(
                update(Group).where(Group.id == group_id).values(status=GroupStatus.FAILED, error=reason)
            )
            for rollout in session.scalars(select(RolloutRow).where(RolloutRow.group_id == group_id)):
                set_aside(rollout, reason)

    def _count(self, collected: Collected) -> None:
        self.carry["groups_stale"] += len(collected.stale)
        self.carry["groups_zero_variance"] += len(collected.zero_variance)
        self.carry["groups_set_aside"] += len(collected.set_aside)
        for group_id, reason in collected.set_aside:
            log.warning(
                "group set aside", extra={"run_id": self.run_id, "group_id": group_id, "reason": reason}
            )

    def _remember(self, collected: Collected) -> list[str]:
        return (self.state.consumed_group_ids + collected.consumed)[-RECENT_CONSUMED:]

    def commit_drops(self, collected: Collected) -> None:
        """Entries that led to no training (redelivered, stale, zero variance, set aside): record, ack."""
        self._count(collected)
        with session_scope(self.sessions) as session:
            self._mark_groups(session, collected, datetime.now(UTC))
        self.state.consumed_group_ids = self._remember(collected)
        self.consumer.ack([e.entry_id for e in collected.entries])

    def _commit(self, record: StepRecord, published: PublishedWeights, collected: Collected) -> None:
        """The step's commit point: its row, its weights row, its groups' statuses, the run's version."""
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
            self._mark_groups(session, collected, datetime.now(UTC))
            session.execute(
                update(Run).where(Run.id == self.run_id).values(policy_version=record.policy_version)
            )

    def _announce_version(self, version: int, published: PublishedWeights) -> None:
        """After the commit: the ``weights`` event, which the updater swaps inference to."""
        publish_weights(self.redis, self.run_id, version, published.object_key)

    def _write_tensorboard(self, record: StepRecord) -> None:
        self.tensorboard.write(self.run_id, record.step, tensorboard_scalars(record))

    def train(self, collected: Collected) -> StepRecord:
        """One step: the update (``Trainer.step``), publish, commit, ack, announce; then timing, TensorBoard and
        the checkpoint, which need the commit."""
        started = time.perf_counter()
        self._count(collected)
        record = self.trainer.step(
            collected, step=self.state.step + 1, learner_version=self.state.policy_version
        )
        new_state = LearnerState(
            step=record.step,
            policy_version=record.policy_version,
            consumed_group_ids=self._remember(collected),
            last_entry_id=collected.entries[-1].entry_id if collected.entries else self.state.last_entry_id,
        )
        publish_started = time.perf_counter()
        published = self._publish_weights(new_state)
        assert published is not None  # rank 0
        record = replace(
            record,
            groups_stale=self.carry["groups_stale"],
            groups_zero_variance=self.carry["groups_zero_variance"],
            groups_set_aside=self.carry["groups_set_aside"],
            weights_sha256=published.sha256,
            published_bytes=published.size_bytes,
            commit_prepare_s=time.perf_counter() - started - record.update.update_s,
            publish_s=time.perf_counter() - publish_started,
            checkpoint_write_s_previous=self.checkpoints.last_write_s,
            step_time_s=time.perf_counter() - started,
        )
        self._commit(record, published, collected)
        window_end, learner_busy_s = time.time(), time.perf_counter() - started
        self.state = new_state
        self.carry = dict.fromkeys(self.carry, 0)
        self.consumer.ack([e.entry_id for e in collected.entries])
        self._announce_version(record.policy_version, published)
        record = record_timing(
            self.sessions,
            record,
            run_id=self.run_id,
            window_end=window_end,
            learner_busy_s=learner_busy_s,
            sampling_lag=self.sampling_lag,
        )
        self._write_tensorboard(record)
        self._maybe_checkpoint(new_state)
        log.info(
            "step committed", extra={"run_id": self.run_id, "step": record.step, "loss": record.update.loss}
        )
        return record

    # --- the loop --------------------------------------------------------------------------------------------
    def step_once(self, wait_s: float = 5.0) -> StepRecord | None:
        collected = self.collect(wait_s)
        if collected.n_new:
            return self.train(collected)
        if collected.decided:  # only redelivered entries: ack them
            self.commit_drops(collected)
        return None

    def follow(self) -> int:
        """Ranks > 0: take rank 0's messages step by step until it says ``Stop``: a ``TrainStep`` is a live step
        (train, help publish, checkpoint), a ``ReplayStep`` retrains a committed step, ``GatherPublished`` gathers
        the replayed weights for rank 0's comparison."""
        steps = 0
        while True:
            message = receive(self.rank)
            if isinstance(message, Stop):
                return steps
            if isinstance(message, GatherPublished):
                published_tensors(self.model, self.publish_dtype, keep=False)
                continue
            if not isinstance(message, TrainStep | ReplayStep):
                raise LearnerError(f"rank {self.rank}: unexpected {type(message).__name__} while following")
            if message.batch is not None:
                self.trainer.update(message.batch)
            self.state.step += 1
            self.state.policy_version += 1
            if isinstance(message, TrainStep):
                self._publish_weights(self.state)
                self._maybe_checkpoint(self.state)
                steps += 1

    def run(self, max_steps: int | None = None, idle_exit_s: float | None = None) -> int:
        """Train until stopped, ``max_steps`` steps, or ``idle_exit_s`` without a trainable group."""
        if self.rank > 0:
            return self.follow()
        try:
            return self._lead(max_steps, idle_exit_s)
        finally:
            if self.world_size > 1:
                send(Stop(), self.rank)

    def _lead(self, max_steps: int | None, idle_exit_s: float | None) -> int:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        steps = 0
        idle_since = time.monotonic()
        while not self.stopping and (max_steps is None or steps < max_steps):
            record = self.step_once()
            if record is not None:
                steps += 1
                idle_since = time.monotonic()
                u = record.update
                print(
                    f"step {record.step} version {record.policy_version} loss {u.loss:.4f} "
                    f"reward {u.reward_mean:.3f} tokens {int(u.tokens_computed)} time {u.update_s:.2f}s",
                    flush=True,
                )
            elif idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                break
            elif self.run_over():
                print(f"run {self.run_id} is over; learner exits", flush=True)
                break
        return steps

    def close(self) -> None:
        self.checkpoints.wait()
        self.tensorboard.close()
        self.redis.close()
        self.engine.dispose()
