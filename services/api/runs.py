"""Runs in the database: create (with tasks and step 0), attach tasks, list with a cursor, detail, stop.

Plain async functions over an ``AsyncSession``; the handlers in ``app.py`` call them inside one transaction, so
a request that fails half-way writes nothing. Idempotent creation: a request with an ``Idempotency-Key``
stores the key on the run (unique column) and a hash of the body in ``config.request_sha256``; the same key
with the same body returns the first run (200), with another body it is a 409.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import datetime
from typing import Any

from sqlalchemy import ScalarSelect, case, func, select, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from services.api import scheduler
from services.api.errors import Conflict, Invalid, NotFound
from services.api.schemas import (
    Progress,
    RewardPoint,
    RunCreate,
    RunDetail,
    RunSummary,
    StepMetrics,
    TasksAdd,
    TasksAdded,
)
from services.api.task_sources import resolve_tasks
from shared.ids import new_id
from shared.models import Group, Reward, Rollout, Run, Step
from shared.models import Task as TaskRow
from shared.tasks import Task

FINISHED_RUN_STATUSES = ("stopped", "completed", "failed")


def request_hash(body: RunCreate) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


async def upsert_tasks(session: AsyncSession, dataset: str, tasks: list[Task]) -> list[str]:
    """Insert or refresh tasks by (dataset, instance_id); returns their ids in the order given."""
    rows = [
        {
            "id": new_id("task"),
            "dataset": dataset,
            "instance_id": t.instance_id,
            "spec": t.model_dump(mode="json"),
        }
        for t in tasks
    ]
    values = insert(TaskRow).values(rows)
    statement = values.on_conflict_do_update(
        constraint="uq_tasks_dataset_instance", set_={"spec": values.excluded.spec}
    ).returning(TaskRow.instance_id, TaskRow.id)
    ids: dict[str, str] = dict((await session.execute(statement)).tuples().all())
    return [ids[t.instance_id] for t in tasks]


async def _run_or_404(session: AsyncSession, run_id: str, lock: bool = False) -> Run:
    query = select(Run).where(Run.id == run_id)
    run = await session.scalar(query.with_for_update() if lock else query)
    if run is None:
        raise NotFound(f"no run {run_id!r}")
    return run


async def create_run(session: AsyncSession, body: RunCreate, idempotency_key: str | None) -> tuple[Run, bool]:
    """Create a run, upsert its tasks and schedule step 0; returns (run, created)."""
    digest = request_hash(body)
    if idempotency_key is not None:
        existing = await session.scalar(select(Run).where(Run.idempotency_key == idempotency_key))
        if existing is not None:
            if existing.config.get("request_sha256") != digest:
                raise Conflict(f"Idempotency-Key {idempotency_key!r} was used with a different request body")
            return existing, False

    dataset, tasks = resolve_tasks(body)
    task_ids = await upsert_tasks(session, dataset, tasks)
    config: dict[str, Any] = {
        "dataset": dataset,
        "task_ids": task_ids,
        "steps": body.steps,
        "groups_per_step": len(scheduler.step_task_ids(task_ids, body.groups_per_step, 0)),
        "harness_command": body.harness_command,
        # Stored as given (the learner's defaults fill the rest); groups_per_step ties one learner step to one
        # sampling step, so the learner never waits for groups that will not come before the next step.
        "grpo": {
            **body.grpo.model_dump(mode="json", exclude_unset=True),
            "groups_per_step": len(scheduler.step_task_ids(task_ids, body.groups_per_step, 0)),
        },
        "sampling": body.sampling.model_dump(mode="json"),
        "limits": body.limits.model_dump(mode="json"),
        "request_sha256": digest,
    }
    run = Run(
        id=new_id("run"),
        name=body.name,
        status="running",
        model=body.model,
        harness=body.harness,
        group_size=body.group_size,
        config=config,
        policy_version=0,
        idempotency_key=idempotency_key,
    )
    session.add(run)
    try:
        await session.flush()
    except IntegrityError:
        # Two requests with one key raced; the other committed first. The caller retries and gets a replay.
        raise Conflict(f"Idempotency-Key {idempotency_key!r} is being used by a concurrent request") from None
    await scheduler.create_step(session, run, 0, policy_version=0)
    await session.refresh(run)
    return run, True


async def add_tasks(session: AsyncSession, run_id: str, body: TasksAdd) -> TasksAdded:
    """Attach more tasks to a run; later steps sample them. Attaching a task twice is a no-op."""
    run = await _run_or_404(session, run_id, lock=True)
    if run.status in FINISHED_RUN_STATUSES or run.status == "stopping":
        raise Conflict(f"run {run_id} is {run.status}; tasks can only be added to an active run")
    dataset, tasks = resolve_tasks(body)
    task_ids = await upsert_tasks(session, dataset, tasks)
    current = list(run.config.get("task_ids", []))
    added = [t for t in task_ids if t not in current]
    run.config = {**run.config, "task_ids": current + added}
    return TasksAdded(run_id=run.id, added=added, tasks=len(current) + len(added))


async def stop_run(session: AsyncSession, run_id: str) -> Run:
    """Ask a run to stop (idempotent); the scheduler cancels its queued rollouts and finishes the stop."""
    run = await _run_or_404(session, run_id, lock=True)
    if run.status in ("completed", "failed"):
        raise Conflict(f"run {run_id} already {run.status}")
    if run.status in ("pending", "running"):
        run.status = "stopping"
        await session.flush()
        await session.refresh(run)
    return run


# --- reading ---------------------------------------------------------------------------------------------


def _current_step() -> ScalarSelect[int | None]:
    return select(func.max(Group.step)).where(Group.run_id == Run.id).scalar_subquery()


def _summary(run: Run, current_step: int | None) -> RunSummary:
    return RunSummary(
        id=run.id,
        name=run.name,
        status=run.status,  # type: ignore[arg-type]
        model=run.model,
        harness=run.harness,
        group_size=run.group_size,
        steps=int(run.config.get("steps", 1)),
        current_step=current_step,
        policy_version=run.policy_version,
        error=run.error,
        created_at=run.created_at,
        updated_at=run.updated_at,
    )


def encode_cursor(created_at: datetime, run_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([created_at.isoformat(), run_id]).encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        created_at, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return datetime.fromisoformat(created_at), str(run_id)
    except (ValueError, TypeError, binascii.Error, UnicodeError):
        raise Invalid.field("query.cursor", "not a cursor this api returned") from None


async def list_runs(
    session: AsyncSession, limit: int, cursor: str | None, status: str | None
) -> tuple[list[RunSummary], str | None]:
    """Newest first; keyset pagination on (created_at, id) so pages stay stable while runs are created."""
    query = select(Run, _current_step()).order_by(Run.created_at.desc(), Run.id.desc()).limit(limit + 1)
    if status is not None:
        query = query.where(Run.status == status)
    if cursor is not None:
        created_at, run_id = decode_cursor(cursor)
        query = query.where(tuple_(Run.created_at, Run.id) < tuple_(created_at, run_id))
    rows = (await session.execute(query)).all()
    items = [_summary(run, step) for run, step in rows[:limit]]
    next_cursor = (
        encode_cursor(rows[limit - 1][0].created_at, rows[limit - 1][0].id) if len(rows) > limit else None
    )
    return items, next_cursor


async def reward_curve(session: AsyncSession, run_id: str) -> list[RewardPoint]:
    query = (
        select(
            Group.step,
            func.count(Reward.id),
            func.avg(Reward.reward),
            func.coalesce(func.stddev_pop(Reward.reward), 0.0),
            func.min(Reward.reward),
            func.max(Reward.reward),
            func.avg(case((Reward.resolved, 1.0), else_=0.0)),
        )
        .select_from(Reward)
        .join(Rollout, Rollout.id == Reward.rollout_id)
        .join(Group, Group.id == Rollout.group_id)
        .where(Rollout.run_id == run_id)
        .group_by(Group.step)
        .order_by(Group.step)
    )
    columns = ("step", "rollouts", "reward_mean", "reward_std", "reward_min", "reward_max", "resolved_rate")
    rows = (await session.execute(query)).all()
    return [RewardPoint.model_validate(dict(zip(columns, row, strict=True))) for row in rows]


async def _counts(session: AsyncSession, column: Any, run_id: str) -> dict[str, int]:
    model = column.class_
    rows = await session.execute(select(column, func.count()).where(model.run_id == run_id).group_by(column))
    return {status: count for status, count in rows.tuples().all()}


async def run_summary(session: AsyncSession, run_id: str) -> RunSummary:
    row = (await session.execute(select(Run, _current_step()).where(Run.id == run_id))).first()
    if row is None:
        raise NotFound(f"no run {run_id!r}")
    return _summary(*row)


async def run_detail(session: AsyncSession, run_id: str) -> RunDetail:
    row = (await session.execute(select(Run, _current_step()).where(Run.id == run_id))).first()
    if row is None:
        raise NotFound(f"no run {run_id!r}")
    run, current_step = row
    groups = await _counts(session, Group.status, run_id)
    rollouts = await _counts(session, Rollout.status, run_id)
    steps = (await session.scalars(select(Step).where(Step.run_id == run_id).order_by(Step.step))).all()
    progress = Progress(
        tasks=len(run.config.get("task_ids", [])),
        groups=groups,
        rollouts=rollouts,
        rollouts_total=sum(rollouts.values()),
        rollouts_done=rollouts.get("graded", 0) + rollouts.get("failed", 0),
        steps_done=len(steps),
    )
    public_config = {k: v for k, v in run.config.items() if k != "request_sha256"}
    return RunDetail(
        **_summary(run, current_step).model_dump(),
        config=public_config,
        progress=progress,
        step_metrics=[StepMetrics.model_validate(s, from_attributes=True) for s in steps],
        reward_curve=await reward_curve(session, run_id),
    )
