"""Step scheduling: who creates step k+1's groups and rollouts, and who puts rollouts on the queue.

The api process owns both, in one loop (``Scheduler.run``, started by ``create_app`` unless disabled):

1. **Enqueue (outbox).** Rollout rows are committed first, with ``meta.enqueued_at`` unset; ``enqueue_pending``
   then sends ``RUN_ROLLOUT`` by name for each and stamps ``enqueued_at``. A crash between the commit and the
   send leaves the row unstamped, so the next tick sends it; a crash between the send and the stamp sends it
   twice, which is harmless because the runner is idempotent by rollout id (``shared/queues.py``). If Redis is
   down, rows stay unstamped and the loop retries every tick.
2. **Advance.** Under a row lock on the run (``SELECT ... FOR UPDATE``, so several api replicas never create a
   step twice), a ``running`` run whose newest step k is finished moves on:
   - step k is finished when every group of it is ``consumed`` by the learner or ``failed``. The learner marks
     groups consumed in the same transaction that commits its step, its ``weights`` row and the run's new
     ``policy_version``; so once step k is finished, whatever the learner will train on it is already visible.
   - if that moved the run's ``policy_version`` past the version step k sampled with, step k+1 waits until the
     inference service marks that version's ``weights`` row ``served`` (or ``rejected``/``failed``: it will
     never be served, and calls record the version that really sampled them) — so step k+1 samples from the
     policy trained on step k;
   - if the learner trained nothing (every group stale, without reward variance, or failed), the version did
     not move and step k+1 starts at once;
   - when k+1 reaches ``config.steps`` the run is ``completed`` instead.
3. **Stop.** A ``stopping`` run (``POST /v1/runs/{id}/stop``) gets its not-yet-started rollouts marked
   ``failed`` ("run stopped") and becomes ``stopped`` once none is running; the runner refuses rollouts of a
   run that is not ``running``.

Every transition is a pure function of database rows, so the loop is idempotent and a restarted api resumes
exactly where the old one stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import cast, func, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from shared.db import async_session_scope
from shared.ids import new_id, new_rollout_key
from shared.metrics import ROLLOUTS_ENQUEUED
from shared.models import Group, Rollout, Run, Weight

log = logging.getLogger(__name__)

STEP_DONE_GROUP_STATUSES = ("consumed", "failed")
WEIGHT_DONE_STATUSES = ("served", "rejected", "failed")
ENQUEUE_BATCH = 200

SendRollout = Callable[[str], None]
"""Puts one rollout id on the rollouts queue (``celery.send_task(RUN_ROLLOUT, args=[id])``)."""


def step_task_ids(task_ids: list[str], groups_per_step: int | None, step: int) -> list[str]:
    """The tasks of one step: a window that walks round the run's task list, no task twice in a step."""
    if not task_ids:
        return []
    per_step = min(groups_per_step or len(task_ids), len(task_ids))
    start = step * per_step
    return [task_ids[(start + i) % len(task_ids)] for i in range(per_step)]


async def create_step(session: AsyncSession, run: Run, step: int, policy_version: int) -> list[Group]:
    """Insert step ``step``'s groups and their queued rollouts (not yet enqueued)."""
    task_ids = step_task_ids(run.config.get("task_ids", []), run.config.get("groups_per_step"), step)
    groups = []
    for task_id in task_ids:
        group = Group(
            id=new_id("grp"),
            run_id=run.id,
            task_id=task_id,
            step=step,
            size=run.group_size,
            status="pending",
            policy_version=policy_version,
        )
        session.add(group)
        groups.append(group)
        for index in range(run.group_size):
            session.add(
                Rollout(
                    id=new_id("ro"),
                    run_id=run.id,
                    group_id=group.id,
                    task_id=task_id,
                    index_in_group=index,
                    harness=run.harness,
                    status="queued",
                    rollout_key=new_rollout_key(),
                    meta={},
                )
            )
    await session.flush()
    return groups


async def served_policy_version(session: AsyncSession, run: Run) -> int | None:
    """The run's newest published version once the inference service is done with it, else None (wait)."""
    if run.policy_version == 0:
        return 0
    status = await session.scalar(
        select(Weight.status).where(Weight.run_id == run.id, Weight.version == run.policy_version)
    )
    return run.policy_version if status in WEIGHT_DONE_STATUSES else None


async def advance_run(session: AsyncSession, run_id: str) -> str | None:
    """Apply at most one transition to a run; returns what happened (for logs and tests) or None."""
    run = await session.scalar(select(Run).where(Run.id == run_id).with_for_update())
    if run is None:
        return None
    if run.status == "stopping":
        return await _finish_stopping(session, run)
    if run.status != "running":
        return None

    newest = await session.scalar(select(func.max(Group.step)).where(Group.run_id == run.id))
    if newest is None:  # a run whose step 0 was never created (e.g. a crash between the two inserts)
        if not run.config.get("task_ids"):
            return None
        await create_step(session, run, 0, run.policy_version)
        return "step 0 created"

    groups = (await session.scalars(select(Group).where(Group.run_id == run.id, Group.step == newest))).all()
    if any(g.status not in STEP_DONE_GROUP_STATUSES for g in groups):
        return None
    version = await served_policy_version(session, run)
    if version is None:
        return None  # the learner published a new policy; wait until inference serves it

    next_step = newest + 1
    if next_step >= int(run.config.get("steps", 1)):
        run.status = "completed"
        return f"completed after step {newest}"
    await create_step(session, run, next_step, version)
    return f"step {next_step} created at policy version {version}"


async def _finish_stopping(session: AsyncSession, run: Run) -> str | None:
    cancelled = await session.execute(
        update(Rollout)
        .where(Rollout.run_id == run.id, Rollout.status == "queued")
        .values(status="failed", error="run stopped before this rollout started")
    )
    running = await session.scalar(
        select(func.count()).select_from(Rollout).where(Rollout.run_id == run.id, Rollout.status == "running")
    )
    if running:
        return f"stopping: {cancelled.rowcount} cancelled, {running} still running"  # type: ignore[attr-defined]
    run.status = "stopped"
    return "stopped"


async def enqueue_pending(
    factory: async_sessionmaker[AsyncSession], send: SendRollout, run_id: str | None = None
) -> int:
    """Send every queued, not yet enqueued rollout of running runs; returns how many were sent.

    Each batch is locked (``FOR UPDATE SKIP LOCKED``), sent and stamped in one transaction, so two api
    replicas never send the same batch; a crash after a send and before the commit re-sends it next tick.
    """
    sent = 0
    while True:
        async with async_session_scope(factory) as session:
            query = (
                select(Rollout.id, Rollout.harness)
                .join(Run, Run.id == Rollout.run_id)
                .where(
                    Run.status == "running",
                    Rollout.status == "queued",
                    Rollout.meta["enqueued_at"].astext.is_(None),
                )
                .order_by(Rollout.created_at, Rollout.id)
                .limit(ENQUEUE_BATCH)
                .with_for_update(of=Rollout, skip_locked=True)
            )
            if run_id is not None:
                query = query.where(Rollout.run_id == run_id)
            batch = (await session.execute(query)).all()
            for rollout_id, harness in batch:
                await asyncio.to_thread(send, rollout_id)
                await session.execute(
                    update(Rollout)
                    .where(Rollout.id == rollout_id)
                    .values(meta=Rollout.meta.op("||")(_enqueued_stamp()))
                )
                ROLLOUTS_ENQUEUED.labels(harness=harness).inc()
                sent += 1
        if not batch:
            return sent


def _enqueued_stamp() -> Any:
    return cast({"enqueued_at": datetime.now(UTC).isoformat()}, JSONB)


class Scheduler:
    """The api's background loop: advance every active run, then enqueue what is pending."""

    def __init__(
        self, factory: async_sessionmaker[AsyncSession], send: SendRollout, interval_s: float = 1.0
    ) -> None:
        self.factory = factory
        self.send = send
        self.interval_s = interval_s

    async def tick(self) -> list[str]:
        async with async_session_scope(self.factory) as session:
            run_ids = (
                await session.scalars(select(Run.id).where(Run.status.in_(("running", "stopping"))))
            ).all()
        events = []
        for run_id in run_ids:
            async with async_session_scope(self.factory) as session:
                event = await advance_run(session, run_id)
            if event:
                log.info("run %s: %s", run_id, event, extra={"run_id": run_id})
                events.append(f"{run_id}: {event}")
        await enqueue_pending(self.factory, self.send)
        return events

    async def run(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A database or Redis outage must not kill the loop; the next tick retries from the rows.
                log.exception("scheduler tick failed")
            await asyncio.sleep(self.interval_s)

    @contextlib.asynccontextmanager
    async def running(self):  # type: ignore[no-untyped-def]
        task = asyncio.create_task(self.run(), name="harnessrl-scheduler")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
