"""Reading one sampling step's groups from the run's ``groups`` stream (``loop.py``, step 1 of its docstring).

``GroupCollector.collect`` reads ``groups_per_step`` newly decided groups and sorts each into trainable, stale,
zero-variance, set aside or redelivered (``Collected``). Owned by the learner's one thread, rank 0 only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from services.learner import grpo
from services.learner.checkpoint import LearnerState
from services.learner.loader import GroupSetAside, LoadedGroup, load_group
from shared.db import session_scope
from shared.events import GroupEntry, GroupStreamConsumer
from shared.models import Group, Run
from shared.objectstore import ObjectStore
from shared.run_config import GRPOConfig
from shared.statuses import RUN_FINISHED, GroupStatus


@dataclass(kw_only=True)
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

    @property
    def consumed(self) -> list[str]:
        """Groups that become ``consumed`` at the commit: trained, stale, zero variance (in that order)."""
        return [g.group_id for g in self.trainable] + self.stale + self.zero_variance


@dataclass(kw_only=True)
class GroupCollector:
    """Rank 0's reader of the run's ``groups`` stream; ``state`` is the learner's (read, never written here)."""

    run_id: str
    sessions: sessionmaker[Session]
    store: ObjectStore
    consumer: GroupStreamConsumer
    config: GRPOConfig
    groups_per_step: int
    max_policy_lag: int
    vocab_size: int
    stopping: Callable[[], bool]
    backlog: list[GroupEntry] = field(default_factory=list)
    _run_checked_at: float = float("-inf")
    _run_over: bool = False

    def collect(self, state: LearnerState, wait_s: float, fill_timeout_s: float = 3600.0) -> Collected:
        """Read one sampling step's worth of groups: ``groups_per_step`` groups decided (trainable, stale, without
        variance, or set aside). Gives up after ``wait_s`` if nothing new arrived; once the first group is in,
        waits up to ``fill_timeout_s`` for the rest (its siblings are still being rolled out and graded), unless
        the learner is stopping or the run is over."""
        collected = Collected()
        deadline = time.monotonic() + wait_s
        while collected.n_new < self.groups_per_step and not self.stopping():
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
                self._classify(entry, collected, state)
            if had_new == 0 and collected.n_new > 0:
                deadline = time.monotonic() + fill_timeout_s
        return collected

    def _classify(self, entry: GroupEntry, collected: Collected, state: LearnerState) -> None:
        collected.entries.append(entry)
        group_id = entry.group_id
        with session_scope(self.sessions) as session:
            group = session.get(Group, group_id)
            if group is not None and (group.status == GroupStatus.CONSUMED or group.consumed_at is not None):
                collected.redelivered.append(group_id)
                return
            if group_id in state.consumed_group_ids or any(
                g.group_id == group_id for g in collected.trainable
            ):
                collected.redelivered.append(group_id)
                return
            started = time.perf_counter()
            try:
                loaded = load_group(session, self.store, group_id, state.policy_version, self.vocab_size)
            except GroupSetAside as exc:
                collected.set_aside.append((group_id, exc.reason))
                return
            finally:
                collected.load_last_group_s = time.perf_counter() - started
                collected.load_s += collected.load_last_group_s
        if state.policy_version - loaded.oldest_version > self.max_policy_lag:
            collected.stale.append(group_id)
            collected.untrained_rewards.extend(loaded.rewards)
        elif float(np.std([grpo.training_reward(r, self.config) for r in loaded.rollouts])) == 0.0:
            collected.zero_variance.append(group_id)
            collected.untrained_rewards.extend(loaded.rewards)
        else:
            collected.trainable.append(loaded)

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
