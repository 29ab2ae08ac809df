"""Loading a GRPO group for training: ``groups``/``rollouts``/``rewards``/``calls`` rows + token segments.

``load_group`` returns a ``LoadedGroup`` (rollouts with their chains, rewards and the oldest policy version that
sampled any of its tokens) or raises ``GroupSetAside`` with a reason a person can act on. A group is set aside —
never half-trained — when any of its token arrays is missing or disagrees with its ``calls`` row: segment
lengths vs ``suffix_tokens``/``completion_tokens``, logprobs vs sampled ids, the segment's policy version vs the
row's, chain positions 0..n-1, a prompt length that does not add up to the chain so far, or a version newer
than the learner's own. Rollouts without a reward (failed before grading) are left out of the group; fewer than
two rewarded rollouts leave no GRPO baseline, and the group is set aside.

A group's token segments (one object per call: 80 for 8 rollouts x 10 turns) are fetched concurrently
(``fetch_segments``): against S3 each GET is a round trip, and fetching them one by one would make a group's
load time the sum of its latencies instead of roughly the slowest one.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from services.learner.types import Chain, InconsistentTrajectory, Rollout, TrainingCall
from shared.models import Call, Group, Reward
from shared.models import Rollout as RolloutRow
from shared.objectstore import ObjectNotFound, ObjectStore
from shared.trajectory import load_segment

SEGMENT_FIELDS = ("prompt_ids", "sampled_ids", "sampled_logprobs", "policy_version")
FETCH_CONCURRENCY = 16

Segment = dict[str, np.ndarray]


def fetch_segments(store: ObjectStore, keys: Iterable[str]) -> dict[str, Segment | Exception]:
    """Every key's token segment, read concurrently; a key that fails maps to its exception (the caller decides
    what a missing or unreadable segment means)."""

    def one(key: str) -> Segment | Exception:
        try:
            return load_segment(store, key)
        except Exception as exc:  # noqa: BLE001 - returned to the caller, which names the call it belongs to
            return exc

    unique = list(dict.fromkeys(keys))
    if len(unique) <= 1:
        return {key: one(key) for key in unique}
    with ThreadPoolExecutor(min(FETCH_CONCURRENCY, len(unique)), thread_name_prefix="segments") as pool:
        return dict(zip(unique, pool.map(one, unique), strict=True))


class GroupSetAside(Exception):
    """This group cannot be trained; ``reason`` says why."""

    def __init__(self, group_id: str, reason: str) -> None:
        super().__init__(f"group {group_id}: {reason}")
        self.group_id = group_id
        self.reason = reason


@dataclass(frozen=True)
class LoadedGroup:
    group_id: str
    rollouts: tuple[Rollout, ...]
    oldest_version: int
    rollouts_without_reward: int

    @property
    def rewards(self) -> list[float]:
        return [r.reward for r in self.rollouts]


def _training_call(
    fetched: dict[str, Segment | Exception], call: Call, expected_prompt: int, learner_version: int
) -> TrainingCall:
    segment = fetched[call.tokens_key]
    if isinstance(segment, ObjectNotFound):
        raise InconsistentTrajectory(f"token arrays {call.tokens_key} of call {call.id} are missing")
    if isinstance(segment, Exception):  # a truncated or foreign blob: numpy raises several types
        raise InconsistentTrajectory(f"token arrays {call.tokens_key} are unreadable: {segment}")
    missing = [name for name in SEGMENT_FIELDS if name not in segment]
    if missing:
        raise InconsistentTrajectory(f"token arrays {call.tokens_key} lack {', '.join(missing)}")
    suffix = np.asarray(segment["prompt_ids"], np.int64)
    sampled = np.asarray(segment["sampled_ids"], np.int64)
    version = int(segment["policy_version"])
    if len(suffix) != call.suffix_tokens or len(sampled) != call.completion_tokens:
        raise InconsistentTrajectory(
            f"call {call.id}: arrays hold {len(suffix)} suffix / {len(sampled)} sampled ids, the row says "
            f"{call.suffix_tokens} / {call.completion_tokens}"
        )
    if call.prompt_tokens != expected_prompt + len(suffix):
        raise InconsistentTrajectory(
            f"call {call.id}: prompt of {call.prompt_tokens} tokens, but the chain so far plus its suffix is "
            f"{expected_prompt + len(suffix)}"
        )
    if version != call.policy_version:
        raise InconsistentTrajectory(
            f"call {call.id}: arrays say policy version {version}, the row says {call.policy_version}"
        )
    if version > learner_version:
        raise InconsistentTrajectory(
            f"call {call.id}: policy version {version} is newer than the learner's {learner_version}"
        )
    training_call = TrainingCall(
        suffix_ids=suffix,
        sampled_ids=sampled,
        sampled_logprobs=np.asarray(segment["sampled_logprobs"], np.float32),
        policy_version=version,
        finish_reason=call.finish_reason,
    )
    training_call.check()
    return training_call


def _chains(
    fetched: dict[str, Segment | Exception],
    rollout: RolloutRow,
    calls: list[Call],
    learner_version: int,
    vocab_size: int | None,
) -> tuple[Chain, ...]:
    by_chain: dict[int, list[Call]] = {}
    for call in calls:
        by_chain.setdefault(call.chain_id, []).append(call)
    chains = []
    for chain_id in sorted(by_chain):
        ordered = sorted(by_chain[chain_id], key=lambda c: c.position)
        positions = [c.position for c in ordered]
        if positions != list(range(len(ordered))):
            raise InconsistentTrajectory(f"chain {chain_id}: call positions {positions} are not 0..n-1")
        training_calls = []
        length = 0
        for call in ordered:
            tc = _training_call(fetched, call, length, learner_version)
            training_calls.append(tc)
            length += len(tc.suffix_ids) + len(tc.sampled_ids)
        chain = Chain(str(chain_id), rollout.id, rollout.group_id or "", tuple(training_calls))
        chain.check(vocab_size)
        chains.append(chain)
    return tuple(chains)


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
            chains = _chains(
                fetched, rollout, calls_by_rollout.get(rollout.id, []), learner_version, vocab_size
            )
        except InconsistentTrajectory as exc:
            raise GroupSetAside(group_id, f"rollout {rollout.id}: {exc}") from None
        versions += [call.policy_version for chain in chains for call in chain.calls]
        loaded.append(Rollout(rollout.id, group_id, float(rewards[rollout.id]), chains))
    if len(loaded) < 2:
        raise GroupSetAside(group_id, f"only {len(loaded)} rewarded rollout(s): no group baseline")
    oldest = min(versions) if versions else group.policy_version
    return LoadedGroup(group_id, tuple(loaded), oldest, len(rollouts) - len(loaded))
