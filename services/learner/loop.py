"""The learner process of one run: read complete groups, train a GRPO step, commit, publish (DESIGN §5).

Owned state and concurrency: one ``Learner`` per run, one thread. It owns the model, the optimizer, the RNGs and
``LearnerState`` (step, policy version, recently consumed groups). Graders append to the run's ``groups`` stream;
the learner reads it as a member of the consumer group ``learner`` and acks an entry only after the step (or the
drop decision) that used it has committed.

One step, in order:
  1. collect one sampling step: ``groups_per_step`` newly decided groups (the api sets it to the groups of one
     sampling step). A group already ``consumed`` (a redelivered entry) is only acked; a group whose oldest
     token is more than ``max_policy_lag`` versions old is dropped (stale); a group with zero reward variance
     carries no GRPO signal and is counted, not trained; a group whose token arrays are missing or
     inconsistent is set aside with its reason (``loader.py``). The rest is the batch.
  2. GRPO update (``grpo.grpo_step``) with the run's reconstruction strategy — or, when no group has signal,
     no update: the step still commits and publishes a version (unchanged weights), so every sampling step
     yields exactly one learner step and one policy version, and the run moves on.
  3. write ``weights/<run>/<version>/model.safetensors`` and the checkpoint (``checkpoint.py``);
  4. one transaction: ``steps`` row with the metrics, ``weights`` row, groups → ``consumed`` (set-aside ones →
     ``failed``, the reason on each rollout's ``meta.learner_set_aside``), ``runs.policy_version``. This commit is
     the step's commit point: a crash before it redoes the step from the previous checkpoint, after it resumes
     from this one.
  5. ack the stream entries, then publish the ``weights`` event. A crash between commit and publish is healed at
     start-up: the learner re-announces its current version (the updater ignores versions it already serves).
A failure after the optimizer step and before the commit leaves in-memory state ahead of the database; the
learner then stops (the supervisor restarts it from the last committed checkpoint) rather than guess.

Under ``torchrun`` (``distributed.py``) rank 0 does all of the above; it broadcasts each batch before its step,
every rank computes its share and the gradients are summed, and ranks > 0 only ``follow``.
"""

from __future__ import annotations

import logging
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import redis
import torch
from sqlalchemy import func, select, update

from services.learner import grpo
from services.learner.checkpoint import LearnerState, load_checkpoint, save_checkpoint
from services.learner.distributed import broadcast, init_from_env
from services.learner.loader import GroupSetAside, LoadedGroup, load_group
from services.learner.policy import load_policy
from services.learner.publish import put_weights, weights_key
from services.learner.types import TrainingBatch
from shared.db import make_engine, session_factory, session_scope
from shared.events import GROUPS_CONSUMER_GROUP, GroupEntry, GroupStreamConsumer, connect, publish_weights
from shared.models import Group, Run, Step, Weight
from shared.models import Rollout as RolloutRow
from shared.objectstore import ObjectNotFound, open_store
from shared.settings import Settings

log = logging.getLogger(__name__)

RECENT_CONSUMED = 1000


class LearnerError(RuntimeError):
    """The learner cannot start or continue; the message says why."""


@dataclass
class Collected:
    """Stream entries read for one step and what became of their groups."""

    entries: list[GroupEntry] = field(default_factory=list)
    trainable: list[LoadedGroup] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    zero_variance: list[str] = field(default_factory=list)
    set_aside: list[tuple[str, str]] = field(default_factory=list)
    redelivered: list[str] = field(default_factory=list)
    untrained_rewards: list[float] = field(default_factory=list)
    """Rewards of the stale and zero-variance groups (reported on the step, not trained on)."""
    load_s: float = 0.0
    """Time spent reading groups' rows and token arrays. Each group is loaded when its entry arrives, while the
    step's other groups are still being rolled out and graded; only the last group's load delays the update."""
    load_last_group_s: float = 0.0

    @property
    def decided(self) -> bool:
        return bool(self.entries)

    @property
    def n_new(self) -> int:
        """Groups decided for the first time (trained, dropped or set aside), redeliveries excluded."""
        return len(self.trainable) + len(self.stale) + len(self.zero_variance) + len(self.set_aside)


@dataclass
class StepReport:
    step: int
    policy_version: int
    metrics: dict[str, Any]


def _untrained_metrics(rewards: list[float]) -> dict[str, Any]:
    """Step metrics of a step that trained nothing."""
    r = np.asarray(rewards, np.float64)
    return {
        "loss": 0.0,
        "clip_fraction": 0.0,
        "kl": 0.0,
        "kl_behavior": 0.0,
        "reward_mean": float(r.mean()) if len(r) else 0.0,
        "reward_std": float(r.std()) if len(r) else 0.0,
        "tokens_computed": 0.0,
        "loss_tokens": 0.0,
        "step_time_s": 0.0,
        "no_update": True,
    }


class Learner:
    def __init__(self, settings: Settings, run_id: str, consumer: str | None = None) -> None:
        self.settings = settings
        self.run_id = run_id
        self.engine = make_engine(settings.database_url)
        self.sessions = session_factory(self.engine)
        self.store = open_store(settings)
        self.redis = connect(settings.redis_url)
        self.stopping = False
        self.rank, self.world_size = init_from_env()
        with session_scope(self.sessions) as session:
            run = session.get(Run, run_id)
            if run is None:
                raise LearnerError(f"no run {run_id!r}")
            run_config = dict(run.config or {})
            last_step = session.scalar(select(func.max(Step.step)).where(Step.run_id == run_id)) or 0
        try:
            self.config = grpo.GRPOConfig.from_dict(
                {"max_policy_lag": settings.max_policy_lag, **run_config.get("grpo", {})}
            )
        except (TypeError, ValueError) as exc:
            raise LearnerError(f"run {run_id}: bad GRPO settings: {exc}") from None
        self.model_dir = Path(run_config.get("model_dir") or settings.resolved_model_dir)
        if not (self.model_dir / "config.json").exists():
            raise LearnerError(f"model directory {self.model_dir} has no config.json")
        torch.manual_seed(self.config.seed)
        np.random.seed(self.config.seed)
        self.model = load_policy(self.model_dir)
        self.model.train()
        self.vocab_size = int(cast(Any, self.model).config.vocab_size)
        self.optimizer = grpo.make_optimizer(self.model, self.config)
        self.reference = load_policy(self.model_dir).eval() if self.config.kl_coef else None
        self.state = LearnerState()
        if last_step:
            try:
                self.state = load_checkpoint(self.store, run_id, last_step, self.model, self.optimizer)
            except ObjectNotFound:
                raise LearnerError(
                    f"run {run_id} committed step {last_step} but its checkpoint is missing"
                ) from None
        self.carry = {"groups_stale": 0, "groups_zero_variance": 0, "groups_set_aside": 0}
        self._run_checked_at = float("-inf")
        self._run_over = False
        if self.rank > 0:
            return  # followers only train on what rank 0 broadcasts
        self.consumer = GroupStreamConsumer(
            self.redis, run_id, consumer or f"learner-{socket.gethostname()}", claim_idle_ms=60_000
        )
        self.backlog: list[GroupEntry] = self.consumer.own_pending(10_000) + self.consumer.claim_stale(10_000)
        if self.state.policy_version > 0:
            publish_weights(self.redis, run_id, self.state.policy_version, self._weights_key())

    def _weights_key(self) -> str:
        return weights_key(self.run_id, self.state.policy_version)

    # --- reading ---------------------------------------------------------------------------------------------
    def _read_new(self, count: int, block_ms: int) -> list[GroupEntry]:
        # Not GroupStreamConsumer.read: that re-delivers this consumer's pending entries first, and ours stay
        # pending on purpose until the step that used them commits.
        try:
            raw = self.redis.xreadgroup(
                GROUPS_CONSUMER_GROUP,
                self.consumer.consumer,
                {self.consumer.stream: ">"},
                count=count,
                block=block_ms,
            )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc) and "UNBLOCKED" not in str(exc):
                raise
            # Redis lost the stream (a restart without persistence): recreate the consumer group and go on;
            # complete groups are rebuilt from Postgres by whoever appends them.
            self.consumer = GroupStreamConsumer(
                self.redis, self.run_id, self.consumer.consumer, claim_idle_ms=60_000
            )
            return []
        entries = []
        for entry_id, fields in raw[0][1] if raw else []:  # type: ignore[index]
            if fields is not None:
                entries.append(
                    GroupEntry(
                        entry_id, fields.get("run_id", self.run_id), fields.get("group_id", ""), fields
                    )
                )
        return entries

    def _classify(self, entry: GroupEntry, collected: Collected) -> None:
        collected.entries.append(entry)
        group_id = entry.group_id
        with session_scope(self.sessions) as session:
            group = session.get(Group, group_id)
            if group is not None and (group.status == "consumed" or group.consumed_at is not None):
                collected.redelivered.append(group_id)
                return
            if group_id in self.state.consumed_group_ids or any(
                g.group_id == group_id for g in collected.trainable
            ):
                collected.redelivered.append(group_id)
                return
            started = time.perf_counter()
            try:
                loaded = load_group(session, self.store, group_id, self.state.policy_version, self.vocab_size)
            except GroupSetAside as exc:
                collected.set_aside.append((group_id, exc.reason))
                return
            finally:
                collected.load_last_group_s = time.perf_counter() - started
                collected.load_s += collected.load_last_group_s
        if self.state.policy_version - loaded.oldest_version > self.config.max_policy_lag:
            collected.stale.append(group_id)
            collected.untrained_rewards.extend(loaded.rewards)
        elif float(np.std(loaded.rewards)) == 0.0:
            collected.zero_variance.append(group_id)
            collected.untrained_rewards.extend(loaded.rewards)
        else:
            collected.trainable.append(loaded)

    def collect(self, wait_s: float, fill_timeout_s: float = 3600.0) -> Collected:
        """Read one sampling step's worth of groups: ``groups_per_step`` groups decided (trainable, stale, without
        variance, or set aside). Gives up after ``wait_s`` if nothing new arrived; once the first group is in,
        waits up to ``fill_timeout_s`` for the rest (its siblings are still being rolled out and graded), unless
        the learner is stopping or the run is over."""
        collected = Collected()
        deadline = time.monotonic() + wait_s
        while collected.n_new < self.config.groups_per_step and not self.stopping:
            want = self.config.groups_per_step - collected.n_new
            if self.backlog:
                entries, self.backlog = self.backlog[:want], self.backlog[want:]
            else:
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    if collected.n_new == 0 or self.run_over():
                        break
                    deadline = time.monotonic() + fill_timeout_s
                    continue
                entries = self._read_new(want, min(remaining_ms, 1000))
            had_new = collected.n_new
            for entry in entries:
                self._classify(entry, collected)
            if had_new == 0 and collected.n_new > 0:
                deadline = time.monotonic() + fill_timeout_s
        return collected

    def run_over(self) -> bool:
        """Whether the run has ended (completed, stopped or failed): then no more groups will come."""
        now = time.monotonic()
        if now - self._run_checked_at < 5.0:
            return self._run_over
        self._run_checked_at = now
        with session_scope(self.sessions) as session:
            status = session.scalar(select(Run.status).where(Run.id == self.run_id))
        self._run_over = status in (None, "completed", "stopped", "failed")
        return self._run_over

    # --- committing ------------------------------------------------------------------------------------------
    def _mark_groups(self, session: Any, collected: Collected, now: datetime) -> None:
        done = [g.group_id for g in collected.trainable] + collected.stale + collected.zero_variance
        if done:
            session.execute(
                update(Group).where(Group.id.in_(done)).values(status="consumed", consumed_at=now)
            )
        for group_id, reason in collected.set_aside:
            session.execute(update(Group).where(Group.id == group_id).values(status="failed"))
            for rollout in session.scalars(select(RolloutRow).where(RolloutRow.group_id == group_id)):
                rollout.meta = {**(rollout.meta or {}), "learner_set_aside": reason}

    def _count(self, collected: Collected) -> None:
        self.carry["groups_stale"] += len(collected.stale)
        self.carry["groups_zero_variance"] += len(collected.zero_variance)
        self.carry["groups_set_aside"] += len(collected.set_aside)
        for group_id, reason in collected.set_aside:
            log.warning(
                "group set aside", extra={"run_id": self.run_id, "group_id": group_id, "reason": reason}
            )

    def _remember(self, collected: Collected) -> list[str]:
        consumed = [g.group_id for g in collected.trainable] + collected.stale + collected.zero_variance
        return (self.state.consumed_group_ids + consumed)[-RECENT_CONSUMED:]

    def commit_drops(self, collected: Collected) -> None:
        """Entries that led to no training (redelivered, stale, zero variance, set aside): record, ack."""
        self._count(collected)
        with session_scope(self.sessions) as session:
            self._mark_groups(session, collected, datetime.now(UTC))
        self.state.consumed_group_ids = self._remember(collected)
        self.consumer.ack([e.entry_id for e in collected.entries])

    def train(self, collected: Collected) -> StepReport:
        started = time.perf_counter()
        self._count(collected)
        rollouts = [r for g in collected.trainable for r in g.rollouts]
        step, version = self.state.step + 1, self.state.policy_version + 1
        if rollouts:
            batch = TrainingBatch(grpo.with_advantages(rollouts, self.config))
            if self.world_size > 1:
                broadcast(("step", batch), self.rank)
            result = grpo.grpo_step(
                self.model,
                self.optimizer,
                batch,
                self.config,
                self.reference,
                rank=0,
                world_size=self.world_size,
            )
            m = result.metrics
            versions = batch.per_loss_token()["policy_version"]
            lag = float((self.state.policy_version - versions).mean()) if len(versions) else 0.0
        else:
            # A sampling step whose groups all lack signal (no reward variance, stale, or set aside): no update,
            # but still one committed step and one version, so versions count steps and the scheduler and
            # inference move on exactly as after a real update (the published weights are unchanged).
            if self.world_size > 1:
                broadcast(("empty", None), self.rank)
            m = _untrained_metrics(collected.untrained_rewards)
            lag = 0.0
        published = put_weights(self.store, self.run_id, version, self.model)
        new_state = LearnerState(
            step=step,
            policy_version=version,
            consumed_group_ids=self._remember(collected),
            last_entry_id=collected.entries[-1].entry_id if collected.entries else self.state.last_entry_id,
        )
        save_checkpoint(self.store, self.run_id, self.model, self.optimizer, new_state)
        metrics = {
            **m,
            "kl_reference": m["kl"],
            "groups_redelivered": len(collected.redelivered),
            "set_aside": [{"group_id": g, "reason": r} for g, r in collected.set_aside],
            "stale_group_ids": collected.stale,
            "strategy": self.config.strategy,
            "weights_sha256": published.sha256,
            "commit_prepare_s": time.perf_counter() - started - m["step_time_s"],
            "load_s": collected.load_s,
            "load_last_group_s": collected.load_last_group_s,
        }
        now = datetime.now(UTC)
        with session_scope(self.sessions) as session:
            session.add(
                Step(
                    run_id=self.run_id,
                    step=step,
                    policy_version=version,
                    loss=m["loss"],
                    clip_fraction=m["clip_fraction"],
                    kl=m["kl"] if self.reference is not None else m["kl_behavior"],
                    reward_mean=m["reward_mean"],
                    reward_std=m["reward_std"],
                    tokens=int(m["tokens_computed"]),
                    policy_lag_mean=lag,
                    step_time_s=time.perf_counter() - started,
                    groups_trained=len(collected.trainable),
                    groups_stale=self.carry["groups_stale"],
                    groups_zero_variance=self.carry["groups_zero_variance"],
                    groups_set_aside=self.carry["groups_set_aside"],
                    metrics=metrics,
                )
            )
            session.add(
                Weight(
                    run_id=self.run_id,
                    version=version,
                    object_key=published.object_key,
                    status="published",
                    size_bytes=published.size_bytes,
                    sha256=published.sha256,
                )
            )
            self._mark_groups(session, collected, now)
            session.execute(update(Run).where(Run.id == self.run_id).values(policy_version=version))
        self.state = new_state
        self.carry = dict.fromkeys(self.carry, 0)
        self.consumer.ack([e.entry_id for e in collected.entries])
        publish_weights(self.redis, self.run_id, version, published.object_key)
        log.info("step committed", extra={"run_id": self.run_id, "step": step, "loss": m["loss"]})
        return StepReport(step, version, metrics)

    # --- the loop --------------------------------------------------------------------------------------------
    def step_once(self, wait_s: float = 5.0) -> StepReport | None:
        collected = self.collect(wait_s)
        if collected.n_new:
            return self.train(collected)
        if collected.decided:  # only redelivered entries: ack them
            self.commit_drops(collected)
        return None

    def follow(self) -> int:
        """Ranks > 0: take rank 0's batches step by step until it says stop."""
        steps = 0
        while True:
            kind, batch = broadcast(None, self.rank)
            if kind == "stop":
                return steps
            if kind == "empty":  # rank 0 committed a step without an update
                self.state.step += 1
                self.state.policy_version += 1
                steps += 1
                continue
            grpo.grpo_step(
                self.model,
                self.optimizer,
                batch,
                self.config,
                self.reference,
                rank=self.rank,
                world_size=self.world_size,
            )
            self.state.step += 1
            self.state.policy_version += 1
            steps += 1

    def run(self, max_steps: int | None = None, idle_exit_s: float | None = None) -> int:
        """Train until stopped, ``max_steps`` steps, or ``idle_exit_s`` without a trainable group."""
        if self.rank > 0:
            return self.follow()
        try:
            return self._lead(max_steps, idle_exit_s)
        finally:
            if self.world_size > 1:
                broadcast(("stop", None), self.rank)

    def _lead(self, max_steps: int | None, idle_exit_s: float | None) -> int:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        steps = 0
        idle_since = time.monotonic()
        while not self.stopping and (max_steps is None or steps < max_steps):
            report = self.step_once()
            if report is not None:
                steps += 1
                idle_since = time.monotonic()
                print(
                    f"step {report.step} version {report.policy_version} loss {report.metrics['loss']:.4f} "
                    f"reward {report.metrics['reward_mean']:.3f} tokens {int(report.metrics['tokens_computed'])} "
                    f"time {report.metrics['step_time_s']:.2f}s",
                    flush=True,
                )
            elif idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                break
            elif self.run_over():
                print(f"run {self.run_id} is over; learner exits", flush=True)
                break
        return steps

    def close(self) -> None:
        self.redis.close()
        self.engine.dispose()
