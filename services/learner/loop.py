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
  4. one transaction: ``steps`` row with the metrics (including the ids of the groups it trained, in order, the
     policy lag of its trained tokens, and its window's wall time and busy fractions: ``_measure``),
     ``weights`` row, groups → ``consumed`` (set-aside ones → ``failed``, the reason on each rollout's
     ``meta.learner_set_aside``), ``runs.policy_version``. This commit is the step's commit point;
  5. ack the stream entries, then publish the ``weights`` event. A crash between commit and publish is healed at
     start-up: the learner re-announces its current version (the updater ignores versions it already serves);
  6. every ``checkpoint_every`` steps, a checkpoint from a copy, written in the background (``checkpoint.py``).

Restart: the learner loads the newest complete checkpoint at or below the last committed step and replays the
committed steps after it from their recorded groups (``_replay``) — no commit, no publish, no stream reads — so
no group is lost or trained twice and no version number is published twice; then it checks the replayed weights
against the last published version's sha256. A failure after the optimizer step and before the commit leaves
in-memory state ahead of the database; the learner then stops (the supervisor restarts it) rather than guess.

Under ``torchrun`` (``distributed.py``) rank 0 does all of the above; it broadcasts each batch before its step,
every rank computes its share (the model sharded by FSDP2, or replicated), every rank helps gather the published
tensors and writes its own checkpoint shard, and ranks > 0 only ``follow``.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from safetensors.torch import save
from sqlalchemy import func, select, update

from services.learner import grpo
from services.learner.checkpoint import (
    CheckpointWriter,
    LearnerState,
    load_checkpoint,
    newest_checkpoint,
    snapshot,
)
from services.learner.distributed import broadcast, init_from_env
from services.learner.loader import GroupSetAside, LoadedGroup, load_group
from services.learner.policy import build_policy, served_dtype
from services.learner.publish import PublishedWeights, put_weights, weights_key
from services.learner.reconstruct import resolve_bf16
from services.learner.types import TrainingBatch
from shared.adapters import adapter_key
from shared.busy_time import busy_seconds, generation_intervals
from shared.db import make_engine, session_factory, session_scope
from shared.events import GroupEntry, GroupStreamConsumer, connect, publish_weights
from shared.models import Group, Run, Step, Weight
from shared.models import Rollout as RolloutRow
from shared.objectstore import open_store
from shared.run_config import RunConfigError, read_run_config
from shared.settings import Settings
from shared.statuses import RUN_FINISHED, GroupStatus, RunKind
from shared.tensorboard import ScalarLog

log = logging.getLogger(__name__)

RECENT_CONSUMED = 1000
# Step metrics written to TensorBoard as ``train/<name>`` (shared/tensorboard.py), beside the steps row.
TENSORBOARD_METRICS = (
    "loss", "reward_mean", "reward_std", "kl", "kl_behavior", "clip_fraction", "tokens_computed", "loss_tokens",
    "step_time_s", "load_s", "publish_s", "cut_fraction",
)  # fmt: skip


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
            if run.kind != RunKind.TRAIN:
                raise LearnerError(f"{run_id} is an eval: nothing of it is ever trained on")
            try:
                run_config = read_run_config(run)
            except RunConfigError as exc:
                raise LearnerError(str(exc)) from None
            last_step = session.scalar(select(func.max(Step.step)).where(Step.run_id == run_id)) or 0
        self.config = run_config.grpo
        self.lora = run_config.lora
        self.groups_per_step = run_config.groups_per_step
        # One bound for the scheduler (how far sampling runs ahead) and this drop; unset: on-policy sampling, and
        # the service's bound for what an on-policy run can still leave behind (shared/run_config.py).
        self.max_policy_lag = self.config.drop_lag(settings.max_policy_lag)
        self.sampling_lag = self.config.sampling_lag
        self.model_dir = Path(run_config.model_dir or settings.resolved_model_dir)
        if not (self.model_dir / "config.json").exists():
            raise LearnerError(f"model directory {self.model_dir} has no config.json")
        torch.manual_seed(self.config.seed)
        np.random.seed(self.config.seed)
        sharded = self.world_size > 1 and self.config.data_parallel == "fsdp"
        # build_policy puts the model on the GPU where there is one.
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.bf16 = resolve_bf16(self.config.bf16_autocast, device)
        self.model = build_policy(
            self.model_dir,
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
            self.reference = build_policy(self.model_dir, shard=sharded, bf16=self.bf16).eval()
        self.checkpoints = CheckpointWriter(
            self.store, run_id, self.rank, self.world_size, self.config.keep_checkpoints
        )
        self.state = LearnerState()
        self.tensorboard = ScalarLog(settings, self.store, writer="learner")
        self.replay_report: dict[str, Any] | None = None
        self.carry = {"groups_stale": 0, "groups_zero_variance": 0, "groups_set_aside": 0}
        self._run_checked_at = float("-inf")
        self._run_over = False
        self._resume(last_step)
        if self.rank > 0:
            return  # followers only train on what rank 0 broadcasts
        self.consumer = GroupStreamConsumer(
            self.redis, run_id, consumer or f"learner-{socket.gethostname()}", claim_idle_ms=60_000
        )
        self.backlog: list[GroupEntry] = self.consumer.own_pending(10_000) + self.consumer.claim_stale(10_000)
        if self.state.policy_version > 0:
            publish_weights(self.redis, run_id, self.state.policy_version, self._weights_key())

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
            start = broadcast(start, self.rank)
        if start < 0:
            raise LearnerError(error if self.rank == 0 else "rank 0 cannot resume this run")
        if start:
            self.state = load_checkpoint(
                self.store, self.run_id, start, self.model, self.optimizer, self.rank, self.world_size
            )
        if self.rank == 0:
            self._replay(start, last_step)
        elif last_step:
            self.follow()  # rank 0 broadcasts the replayed batches, then "stop"

    def _replay(self, after: int, last_step: int) -> None:
        """Rank 0: retrain committed steps ``after+1 .. last_step`` from their recorded groups."""
        if last_step <= after:
            if self.world_size > 1 and last_step:
                broadcast(("stop", None), self.rank)
            return
        started = time.perf_counter()
        with session_scope(self.sessions) as session:
            rows = session.scalars(
                select(Step).where(Step.run_id == self.run_id, Step.step > after).order_by(Step.step)
            ).all()
            plan = [
                (row.step, row.policy_version, (row.metrics or {}).get("trained_group_ids")) for row in rows
            ]
            published = session.scalars(
                select(Weight.sha256).where(Weight.run_id == self.run_id, Weight.version == last_step)
            ).first()
        try:
            for step, version, group_ids in plan:
                if group_ids is None:
                    raise LearnerError(
                        f"run {self.run_id}: step {step} does not record its groups; cannot replay it from "
                        f"checkpoint {after}"
                    )
                batch = self._replay_batch(group_ids, version - 1)
                if self.world_size > 1:
                    broadcast(("replay", batch), self.rank)
                if batch is not None:
                    grpo.grpo_step(
                        self.model,
                        self.optimizer,
                        batch,
                        self.config,
                        self.reference,
                        rank=0,
                        world_size=self.world_size,
                    )
                self.state = LearnerState(
                    step=step,
                    policy_version=version,
                    consumed_group_ids=(self.state.consumed_group_ids + group_ids)[-RECENT_CONSUMED:],
                    last_entry_id=self.state.last_entry_id,
                )
            if self.world_size > 1:
                broadcast(("check", None), self.rank)
            from services.learner.publish import published_tensors

            blob = save(published_tensors(self.model, self.publish_dtype))
        finally:
            if self.world_size > 1:
                broadcast(("stop", None), self.rank)
        sha = hashlib.sha256(blob).hexdigest()
        self.replay_report = {
            "from_checkpoint": after,
            "steps": [p[0] for p in plan],
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

    def _publish_and_checkpoint(self, state: LearnerState) -> PublishedWeights | None:
        """Every rank: gather and (rank 0) write the version; every ``checkpoint_every`` steps, checkpoint."""
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
    def _classify(self, entry: GroupEntry, collected: Collected) -> None:
        collected.entries.append(entry)
        group_id = entry.group_id
        with session_scope(self.sessions) as session:
            group = session.get(Group, group_id)
            if group is not None and (group.status == GroupStatus.CONSUMED or group.consumed_at is not None):
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
        if self.state.policy_version - loaded.oldest_version > self.max_policy_lag:
            collected.stale.append(group_id)
            collected.untrained_rewards.extend(loaded.rewards)
        elif float(np.std([grpo.training_reward(r, self.config) for r in loaded.rollouts])) == 0.0:
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
        while collected.n_new < self.groups_per_step and not self.stopping:
            want = self.groups_per_step - collected.n_new
            if self.backlog:
                entries, self.backlog = self.backlog[:want], self.backlog[want:]
            else:
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    if collected.n_new == 0 or self.run_over():
                        break
                    deadline = time.monotonic() + fill_timeout_s
                    continue
                entries = self.consumer.read_new(want, min(remaining_ms, 1000))
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
        self._run_over = status is None or status in RUN_FINISHED
        return self._run_over

    # --- committing ------------------------------------------------------------------------------------------
    def _mark_groups(self, session: Any, collected: Collected, now: datetime) -> None:
        done = [g.group_id for g in collected.trainable] + collected.stale + collected.zero_variance
        if done:
            session.execute(
                update(Group).where(Group.id.in_(done)).values(status=GroupStatus.CONSUMED, consumed_at=now)
            )
        for group_id, reason in collected.set_aside:
            session.execute(
                update(Group).where(Group.id == group_id).values(status=GroupStatus.FAILED, error=reason)
            )
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
            token_lags = self.state.policy_version - batch.per_loss_token()["policy_version"]
            lag = float(token_lags.mean()) if len(token_lags) else 0.0
            lag_max = int(token_lags.max()) if len(token_lags) else 0
        else:
            # A sampling step whose groups all lack signal (no reward variance, stale, or set aside): no update,
            # but still one committed step and one version, so versions count steps and the scheduler and
            # inference move on exactly as after a real update (the published weights are unchanged).
            if self.world_size > 1:
                broadcast(("empty", None), self.rank)
            m = _untrained_metrics(collected.untrained_rewards)
            lag, lag_max = 0.0, 0
        new_state = LearnerState(
            step=step,
            policy_version=version,
            consumed_group_ids=self._remember(collected),
            last_entry_id=collected.entries[-1].entry_id if collected.entries else self.state.last_entry_id,
        )
        publish_started = time.perf_counter()
        published = self._publish_and_checkpoint(new_state)
        assert published is not None  # rank 0
        metrics = {
            **m,
            "kl_reference": m["kl"],
            "groups_redelivered": len(collected.redelivered),
            "set_aside": [{"group_id": g, "reason": r} for g, r in collected.set_aside],
            "stale_group_ids": collected.stale,
            "strategy": self.config.strategy,
            "compute_dtype": "bfloat16" if self.bf16 else "float32",
            "weights_sha256": published.sha256,
            "commit_prepare_s": time.perf_counter() - started - m["step_time_s"],
            "load_s": collected.load_s,
            "load_last_group_s": collected.load_last_group_s,
            "publish_s": time.perf_counter() - publish_started,
            "published_bytes": published.size_bytes,
            "trained_group_ids": [g.group_id for g in collected.trainable],
            "checkpoint_write_s_previous": self.checkpoints.last_write_s,
            "policy_lag_max": lag_max,
            "cut_fraction": sum(1 for r in rollouts if r.calls_cut) / len(rollouts) if rollouts else 0.0,
        }
        window_end = time.time()
        busy = self._measure(step, window_end, learner_busy_s=time.perf_counter() - started)
        metrics |= busy.pop(step)
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
            for row in session.scalars(select(Step).where(Step.run_id == self.run_id, Step.step.in_(busy))):
                row.metrics = {**row.metrics, **busy[row.step]}
        self.state = new_state
        self.carry = dict.fromkeys(self.carry, 0)
        self.consumer.ack([e.entry_id for e in collected.entries])
        publish_weights(self.redis, self.run_id, version, published.object_key)
        self.tensorboard.write(self.run_id, step, {f"train/{k}": metrics.get(k) for k in TENSORBOARD_METRICS})
        self._maybe_checkpoint(new_state)
        log.info("step committed", extra={"run_id": self.run_id, "step": step, "loss": m["loss"]})
        return StepReport(step, version, metrics)

    # --- measuring -----------------------------------------------------------------------------------------
    def _measure(self, step: int, window_end: float, learner_busy_s: float) -> dict[int, dict[str, float]]:
        """Step ``step``'s time figures, and the inference figures of the ``sampling_lag`` steps before it again.

        A step's **window** is the wall time from the previous step's commit (for step 1: the creation of the run's
        first groups, when its sampling began) to this step's commit (``window_start_unix``, ``window_end_unix``,
        Unix seconds; ``wall_s`` = their difference), so the windows of a run tile its training time and
        ``wall_s`` is the wall time per step. In it:

        - ``learner_busy_s``: this step's update, publishing and the work before the commit (``train``), the work
          a GPU learner would do; group loading (``load_s``) happens while rollouts run and is reported apart.
          ``learner_busy_fraction`` = ``learner_busy_s / wall_s``.
        - ``inference_busy_s``: time with at least one of the run's calls in generation (``shared/busy_time.py``:
          from the request sent to the engine to its last token, as the gateway stamped them).
          ``inference_busy_fraction`` = ``inference_busy_s / wall_s``.

        The gateway records a call after its reply, so calls still generating at a commit are missing from the
        figure until recorded. Sampling runs at most ``sampling_lag`` steps ahead and a step's rollouts are all
        recorded before it is trained, so every call that overlaps step j's window is recorded by the commit of
        step j + ``sampling_lag``: each commit measures its window and measures the previous ``sampling_lag``
        windows again (on-policy, nothing generates at a commit and the first figure is final)."""
        with session_scope(self.sessions) as session:
            rows = session.execute(
                select(Step.step, Step.metrics, Step.created_at).where(
                    Step.run_id == self.run_id,
                    Step.step >= step - max(self.sampling_lag, 1),
                    Step.step < step,
                )
            ).all()
            windows = {
                r.step: (r.metrics["window_start_unix"], r.metrics["window_end_unix"])
                for r in rows
                if "window_end_unix" in r.metrics and r.step >= step - self.sampling_lag
            }
            previous = [r for r in rows if r.step == step - 1]
            if previous:
                start = previous[0].metrics.get("window_end_unix", previous[0].created_at.timestamp())
            else:
                first = session.scalar(select(func.min(Group.created_at)).where(Group.run_id == self.run_id))
                start = first.timestamp() if first is not None else window_end - learner_busy_s
            windows[step] = (start, window_end)
            intervals = generation_intervals(
                session, self.run_id, min(a for a, _ in windows.values()), window_end
            )
        figures: dict[int, dict[str, float]] = {}
        for s, (a, b) in windows.items():
            wall = max(b - a, 1e-9)
            inference = busy_seconds(intervals, a, b)
            figures[s] = {"inference_busy_s": inference, "inference_busy_fraction": inference / wall}
        wall = max(window_end - start, 1e-9)
        figures[step] |= {
            "window_start_unix": start,
            "window_end_unix": window_end,
            "wall_s": window_end - start,
            "learner_busy_s": learner_busy_s,
            "learner_busy_fraction": min(1.0, learner_busy_s / wall),
        }
        return figures

    # --- the loop --------------------------------------------------------------------------------------------
    def step_once(self, wait_s: float = 5.0) -> StepReport | None:
        collected = self.collect(wait_s)
        if collected.n_new:
            return self.train(collected)
        if collected.decided:  # only redelivered entries: ack them
            self.commit_drops(collected)
        return None

    def follow(self) -> int:
        """Ranks > 0: take rank 0's batches step by step until it says stop. ``step``/``empty`` are live steps
        (train, help publish, checkpoint); ``replay`` retrains a committed step; ``check`` gathers the replayed
        weights for rank 0's comparison."""
        steps = 0
        while True:
            kind, batch = broadcast(None, self.rank)
            if kind == "stop":
                return steps
            if kind == "check":
                from services.learner.publish import published_tensors

                published_tensors(self.model, self.publish_dtype, keep=False)
                continue
            if batch is not None:
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
            if kind != "replay":
                self._publish_and_checkpoint(self.state)
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
        self.checkpoints.wait()
        self.tensorboard.close()
        self.redis.close()
        self.engine.dispose()
