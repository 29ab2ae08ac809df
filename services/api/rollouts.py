"""One rollout with everything a person debugging it wants: task, calls, chains, patch, reward, log links.

Big things stay in the object store; the response carries presigned URLs (``file://`` URIs for the local
store) and the first 256 KiB of the patch inline. Object-store calls are blocking (the ``minio`` client), so
they run in a worker thread.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from services.api.errors import NotFound
from services.api.schemas import CallOut, ChainOut, ObjectLink, Patch, RewardOut, RolloutDetail, TaskRef
from shared.models import Call, Chain, Group, Reward, Rollout, Task
from shared.objectstore import ObjectNotFound, ObjectStore
from shared.rollout_records import RolloutMeta, RolloutMetaError, queue_state, read_meta
from shared.trajectory import rollout_logs_prefix, rows_by_chain

PATCH_INLINE_BYTES = 256 * 1024
LINK_EXPIRES_S = 3600


def _link(store: ObjectStore, key: str | None) -> ObjectLink | None:
    if not key:
        return None
    try:
        return ObjectLink(key=key, url=store.presigned_get(key, LINK_EXPIRES_S))
    except ObjectNotFound:
        return None


def _patch(store: ObjectStore, key: str | None) -> Patch | None:
    link = _link(store, key)
    if link is None:
        return None
    data = store.get_bytes(link.key)
    head = data[:PATCH_INLINE_BYTES]
    return Patch(
        key=link.key,
        url=link.url,
        size_bytes=len(data),
        text=head.decode("utf-8", errors="replace"),
        truncated=len(data) > PATCH_INLINE_BYTES,
    )


def _logs(store: ObjectStore, rollout: Rollout) -> list[ObjectLink]:
    keys = list(store.list(rollout_logs_prefix(rollout.run_id, rollout.id)))
    if rollout.logs_key and rollout.logs_key not in keys:
        keys.insert(0, rollout.logs_key)
    return [link for key in keys if (link := _link(store, key)) is not None]


def _stored_meta(rollout: Rollout) -> tuple[RolloutMeta | None, str | None]:
    """The rollout's record, or None and why not: a row that does not validate is shown with its error."""
    try:
        return read_meta(rollout), None
    except RolloutMetaError as exc:
        return None, str(exc)


async def rollout_detail(session: AsyncSession, store: ObjectStore, rollout_id: str) -> RolloutDetail:
    row = (
        await session.execute(
            select(Rollout, Task, Group.step)
            .join(Task, Task.id == Rollout.task_id)
            .outerjoin(Group, Group.id == Rollout.group_id)
            .where(Rollout.id == rollout_id)
        )
    ).first()
    if row is None:
        raise NotFound(f"no rollout {rollout_id!r}")
    rollout, task, step = row
    reward = await session.scalar(select(Reward).where(Reward.rollout_id == rollout_id))
    chains = (
        await session.scalars(select(Chain).where(Chain.rollout_id == rollout_id).order_by(Chain.id))
    ).all()
    calls = (await session.scalars(select(Call).where(Call.rollout_id == rollout_id))).all()

    patch, logs, reward_logs = await asyncio.to_thread(
        lambda: (
            _patch(store, rollout.patch_key),
            _logs(store, rollout),
            _link(store, reward.logs_key) if reward else None,
        )
    )
    meta, meta_error = _stored_meta(rollout)
    return RolloutDetail(
        id=rollout.id,
        run_id=rollout.run_id,
        group_id=rollout.group_id,
        step=step,
        index_in_group=rollout.index_in_group,
        task=TaskRef(id=task.id, dataset=task.dataset, instance_id=task.instance_id),
        harness=rollout.harness,
        status=rollout.status,
        attempt=rollout.attempt,
        isolation=rollout.isolation,
        policy_version_start=rollout.policy_version_start,
        harness_exit_code=rollout.harness_exit_code,
        harness_outcome=rollout.harness_outcome,
        outcome=rollout.outcome,
        outcome_reason=rollout.outcome_reason,
        error=rollout.error,
        meta=meta,
        meta_error=meta_error,
        queue=queue_state(rollout),
        created_at=rollout.created_at,
        started_at=rollout.started_at,
        finished_at=rollout.finished_at,
        reward=RewardOut(
            reward=reward.reward,
            resolved=reward.resolved,
            reward_fn=reward.reward_fn,
            outcome=reward.outcome,
            tests=reward.tests,
            grading_s=reward.grading_s,
            logs=reward_logs,
        )
        if reward
        else None,
        patch=patch,
        logs=logs,
        chains=[ChainOut.model_validate(c, from_attributes=True) for c in chains],
        calls=[
            CallOut.model_validate(call, from_attributes=True)
            for chain_calls in rows_by_chain(calls).values()
            for call in chain_calls
        ],
    )
