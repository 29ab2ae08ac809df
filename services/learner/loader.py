"""Loading recorded rollouts for training: a GRPO group (``load_group``), or an SFT batch of rollouts by id
(``load_rollouts``), from ``groups``/``rollouts``/``rewards``/``calls`` rows + token segments.

``load_group`` returns a ``LoadedGroup`` (rollouts with their chains, rewards and the oldest policy version that
sampled any of its tokens) or raises ``GroupSetAside`` with a reason a person can act on. The recorded format
and its checks are ``shared/trajectory.py``'s (``fetch_segments``, ``chains_from_rows``): a group is set aside —
never half-trained — when any of its token arrays is missing or disagrees with its ``calls`` row (lengths,
versions, positions, prompt lengths), or carries a version newer than the learner's own. A group holding a rollout that ended with an infrastructure error or was cancelled
(``shared/statuses.py: NEVER_TRAINED_OUTCOMES``) is set aside whole: what its rollouts scored would partly measure
the infrastructure, not the model. Other rollouts without a reward (a harness that failed before its first call)
are left out of the group; fewer than two rewarded rollouts leave no GRPO baseline, and the group is set aside. A
group with a call a teacher answered (``calls.source = teacher``: a run or eval that names a teacher) is set aside
with that reason: no policy sampled those tokens, so there is no behaviour logprob to weigh them by.

A group's token segments (one object per call: 80 for 8 rollouts x 10 turns) are fetched concurrently, in one
``fetch_segments`` call: against S3 each GET is a round trip, and fetching them one by one would make a group's
load time the sum of its latencies instead of roughly the slowest one.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from services.learner.types import Rollout
from shared.models import Call, Group, Reward, Run, Step
from shared.models import Rollout as RolloutRow
from shared.objectstore import ObjectStore
from shared.run_config import RunConfig, RunConfigError, read_run_config
from shared.statuses import NEVER_TRAINED_OUTCOMES, RunKind
from shared.trajectory import CUT_BY_LENGTH, InconsistentTrajectory, chains_from_rows, fetch_segments


class GroupSetAside(Exception):
    """This group cannot be trained; ``reason`` says why."""

    def __init__(self, group_id: str, reason: str) -> None:
        super().__init__(f"group {group_id}: {reason}")
        self.group_id = group_id
        self.reason = reason


@dataclass(frozen=True, kw_only=True)
class LoadedGroup:
    group_id: str
    rollouts: tuple[Rollout, ...]
    oldest_version: int
    rollouts_without_reward: int

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.rollouts]


def load_group(
    session: Session,
    store: ObjectStore,
    group_id: str,
    learner_version: int,
    vocab_size: int | None = None,
) -> LoadedGroup:
    group = session.get(Group, group_id)
    if group is None:
        raise GroupSetAside(group_id, "no such group row")
    rollouts = session.scalars(
        select(RolloutRow).where(RolloutRow.group_id == group_id).order_by(RolloutRow.index_in_group)
    ).all()
    for rollout in rollouts:
        if rollout.outcome in NEVER_TRAINED_OUTCOMES:
            raise GroupSetAside(
                group_id,
                f"rollout {rollout.id} ended {rollout.outcome} ({rollout.outcome_reason}): {rollout.error}",
            )
    rewards = {
        r.rollout_id: r.reward
        for r in session.scalars(select(Reward).where(Reward.rollout_id.in_([ro.id for ro in rollouts])))
    }
    calls_by_rollout: dict[str, list[Call]] = {}
    for call in session.scalars(select(Call).where(Call.rollout_id.in_([ro.id for ro in rollouts]))):
        calls_by_rollout.setdefault(call.rollout_id, []).append(call)
    fetched = fetch_segments(
        store,
        (call.tokens_key for r in rollouts if r.id in rewards for call in calls_by_rollout.get(r.id, [])),
    )
    loaded: list[Rollout] = []
    versions: list[int] = []
    for rollout in rollouts:
        if rollout.id not in rewards:
            continue
        try:
            chains = chains_from_rows(
                calls_by_rollout.get(rollout.id, []),
                fetched,
                rollout_id=rollout.id,
                group_id=rollout.group_id or "",
                newest_version=learner_version,
                vocab_size=vocab_size,
            )
        except InconsistentTrajectory as exc:
            raise GroupSetAside(group_id, f"rollout {rollout.id}: {exc}") from None
        if taught := sum(chain.teacher_calls for chain in chains):
            raise GroupSetAside(
                group_id,
                f"rollout {rollout.id}: {taught} of its calls were answered by a teacher (calls.source = teacher): "
                "they carry no behaviour logprobs for GRPO's importance ratio; train on them with SFT",
            )
        versions += [call.policy_version for chain in chains for call in chain.calls]
        cut = sum(call.finish_reason == CUT_BY_LENGTH for call in calls_by_rollout.get(rollout.id, []))
        loaded.append(
            Rollout(
                rollout_id=rollout.id,
                group_id=group_id,
                reward=float(rewards[rollout.id]),
                chains=chains,
                calls_cut=cut,
            )
        )
    if len(loaded) < 2:
        raise GroupSetAside(group_id, f"only {len(loaded)} rewarded rollout(s): no group baseline")
    oldest = min(versions) if versions else group.policy_version
    return LoadedGroup(
        group_id=group_id,
        rollouts=tuple(loaded),
        oldest_version=oldest,
        rollouts_without_reward=len(rollouts) - len(loaded),
    )


def load_rollouts(
    session: Session, store: ObjectStore, rollout_ids: list[str], vocab_size: int | None = None
) -> list[Rollout]:
    """Recorded rollouts by id, in that order, each with all its chains and its reward (0.0 where it has none):
    an SFT batch (``sft_loop.py``). Their group, outcome and policy versions do not matter here — the selection
    (``shared/rollout_selection.py``) chose them — but their token arrays are checked as a GRPO group's are, and a
    missing or inconsistent one is an ``InconsistentTrajectory`` naming the rollout."""
    rows = {r.id: r for r in session.scalars(select(RolloutRow).where(RolloutRow.id.in_(rollout_ids)))}
    missing = [rollout_id for rollout_id in rollout_ids if rollout_id not in rows]
    if missing:
        raise InconsistentTrajectory(f"rollout(s) {', '.join(missing[:5])} no longer exist")
    rewards = {
        r.rollout_id: r.reward
        for r in session.scalars(select(Reward).where(Reward.rollout_id.in_(rollout_ids)))
    }
    calls_by_rollout: dict[str, list[Call]] = {}
    for call in session.scalars(select(Call).where(Call.rollout_id.in_(rollout_ids))):
        calls_by_rollout.setdefault(call.rollout_id, []).append(call)
    fetched = fetch_segments(
        store, (call.tokens_key for calls in calls_by_rollout.values() for call in calls)
    )
    loaded = []
    for rollout_id in rollout_ids:
        try:
            chains = chains_from_rows(
                calls_by_rollout.get(rollout_id, []),
                fetched,
                rollout_id=rollout_id,
                group_id=rows[rollout_id].group_id or "",
                vocab_size=vocab_size,
            )
        except InconsistentTrajectory as exc:
            raise InconsistentTrajectory(f"rollout {rollout_id}: {exc}") from None
        if not chains:
            raise InconsistentTrajectory(f"rollout {rollout_id} has no recorded calls")
        loaded.append(
            Rollout(
                rollout_id=rollout_id,
                group_id=rows[rollout_id].group_id or "",
                reward=float(rewards.get(rollout_id) or 0.0),
                chains=chains,
            )
        )
    return loaded


def read_learner_run(session: Session, run_id: str, kind: RunKind) -> tuple[RunConfig, int]:
    """A learner's run: its config and its last committed step (0 before the first). ``RunConfigError`` when the
    run does not exist, is not of ``kind`` (an eval is never trained on; a GRPO learner never takes an SFT run, nor
    the other way round) or its config does not read."""
    run = session.get(Run, run_id)
    if run is None:
        raise RunConfigError(f"no run {run_id!r}")
    if run.kind != kind:
        raise RunConfigError(f"{run_id} is a {run.kind} run; this learner trains {kind} runs")
    run_config = read_run_config(run)
    last_step = session.scalar(select(func.max(Step.step)).where(Step.run_id == run_id)) or 0
    return run_config, last_step
