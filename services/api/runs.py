"""Runs in the database: create (with tasks and step 0), attach tasks, list with a cursor, detail, stop.

Plain async functions over an ``AsyncSession``; the handlers in ``app.py`` call them inside one transaction, so
a request that fails half-way writes nothing. Idempotent creation: a request with an ``Idempotency-Key``
stores the key on the run (unique column) and a hash of the body in ``RunConfig.request_sha256``; the same key
with the same body returns the first run (200), with another body it is a 409.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
from datetime import datetime
from typing import Any

from sqlalchemy import ScalarSelect, case, func, select, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from services.api import evals, scheduler
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
    TaskSource,
)
from services.api.task_sources import resolve_tasks
from services.api.teachers import check_teacher
from shared.adapters import is_adapter_key
from shared.context_fit import first_prompt_warning
from shared.harnesses import HarnessConfig
from shared.host_paths import HostPathRefused, check_shell_paths
from shared.ids import new_id
from shared.models import Group, Reward, Rollout, Run, Step, Weight
from shared.models import Task as TaskRow
from shared.run_config import InitFrom, RunConfig, RunConfigError, RunSpec, read_run_config
from shared.settings import Settings
from shared.statuses import ROLLOUT_TERMINAL, RUN_FINISHED, RunKind, RunStatus, WeightStatus
from shared.tasks import Task

log = logging.getLogger(__name__)


def request_hash(body: RunCreate) -> str:
    # ``strict`` only decides how the create is checked, not what run it makes.
    canonical = json.dumps(
        body.model_dump(mode="json", exclude={"strict"}), sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_harness_paths(harness: HarnessConfig, settings: Settings) -> None:
    """A ``shell`` harness's mounts and home template the sandbox must not or cannot use are a 422."""
    try:
        check_shell_paths(harness, settings)
    except HostPathRefused as exc:
        raise Invalid.field(exc.field, exc.message) from None


def preflight_run(body: RunCreate, settings: Settings) -> list[str]:
    """Checks of a run before it is created (blocking work: call it in a thread). Raises ``Invalid`` (422) for a
    ``shell`` harness's mount or home template the sandbox must not or cannot use (``shared/host_paths.py``), and,
    with ``strict``, for a first prompt that does not fit the model's context; returns that one as a warning
    otherwise (``shared/context_fit.py``: every rollout would end with reason ``context``)."""
    check_harness_paths(body.harness, settings)
    _, tasks = resolve_tasks(body)
    if body.eval.dataset is not None:  # the run's scheduled evals load it later: refused now, not then
        try:
            resolve_tasks(TaskSource(dataset=body.eval.dataset, split=body.eval.split))
        except Invalid as exc:
            field = "split" if exc.detail and exc.detail[0]["loc"] == "body.split" else "dataset"
            raise Invalid.field(
                f"body.eval.{field}", exc.detail[0]["msg"] if exc.detail else exc.message
            ) from None
    elif body.eval.split is not None:
        raise Invalid.field("body.eval.split", "a split needs eval.dataset (null = the run's own tasks)")
    model_dir = (
        settings.resolved_model_dir
    )  # the served model (a run's model_dir is set by tests and benches)
    try:
        warning = first_prompt_warning(
            body.harness, model_dir, settings.max_model_len, [t.problem_statement for t in tasks]
        )
    except Exception as exc:  # no tokenizer here (a remote model): the run is created unchecked
        log.warning("first-prompt check skipped for %s: %s", model_dir, exc)
        return []
    if warning and body.strict:
        raise Invalid.field("harness", warning)
    return [warning] if warning else []


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


async def resolve_init(session: AsyncSession, body: RunCreate) -> tuple[InitFrom | None, str | None]:
    """The run's ``init`` with its version resolved (null = the init run's newest), checked — a run that exists and
    trains (not an eval), a published full-weight version, never with ``lora`` (``shared/run_config.py:
    InitFrom``); a 422 naming ``body.init`` otherwise — and the model directory the new run trains: the init
    run's (its weights are that model's)."""
    init = body.init
    if init is None:
        return None, None
    if body.lora is not None:
        raise Invalid.field(
            "body.init", "a LoRA run trains an adapter on the served base weights; drop init or lora"
        )
    source = await session.get(Run, init.run_id)
    if source is None:
        raise Invalid.field("body.init.run_id", f"no run {init.run_id!r}")
    if source.kind not in (RunKind.TRAIN, RunKind.SFT):
        raise Invalid.field("body.init.run_id", f"{init.run_id} is an eval: it publishes no weights")
    source_config, error = _stored_config(source)
    if source_config is None:
        raise Invalid.field("body.init.run_id", f"its config cannot be read: {error}")
    version = source.policy_version if init.version is None else init.version
    if version == 0:  # its version 0: what it started from, its own init or the base weights
        return source_config.init, source_config.model_dir
    weight = await session.scalar(select(Weight).where(Weight.run_id == source.id, Weight.version == version))
    if weight is None or weight.status in (WeightStatus.REJECTED, WeightStatus.FAILED):
        why = "was not published" if weight is None else f"was {weight.status}"
        raise Invalid.field("body.init.version", f"version {version} of run {source.id} {why}")
    if is_adapter_key(weight.object_key):
        raise Invalid.field(
            "body.init.version", f"version {version} of run {source.id} is a LoRA adapter, not weights"
        )
    return InitFrom(run_id=source.id, version=version), source_config.model_dir


async def _run_or_404(session: AsyncSession, run_id: str, lock: bool = False) -> Run:
    query = select(Run).where(Run.id == run_id)
    run = await session.scalar(query.with_for_update() if lock else query)
    if run is None:
        raise NotFound(f"no run {run_id!r}")
    return run


async def create_run(
    session: AsyncSession, body: RunCreate, idempotency_key: str | None, queued: bool = False
) -> tuple[Run, bool]:
    """Create a run and upsert its tasks; returns (run, created). ``queued`` (``Settings.pool_exclusive``): the
    run waits as ``queued`` and the scheduler starts it when the inference pool is its turn
    (``scheduler.PoolGate``); otherwise it is ``running`` with step 0 scheduled at once."""
    digest = request_hash(body)
    if idempotency_key is not None:
        existing = await session.scalar(select(Run).where(Run.idempotency_key == idempotency_key))
        if existing is not None:
            if read_run_config(existing).request_sha256 != digest:
                raise Conflict(f"Idempotency-Key {idempotency_key!r} was used with a different request body")
            return existing, False

    init, model_dir = await resolve_init(session, body)
    dataset, tasks = resolve_tasks(body)
    check_teacher(body.teacher, dataset, body.split, tasks)
    task_ids = await upsert_tasks(session, dataset, tasks)
    config = RunConfig(
        **{name: getattr(body, name) for name in RunSpec.model_fields if name != "init"},
        init=init,
        model_dir=model_dir,
        dataset=dataset,
        task_ids=task_ids,
        # Fixed at creation: the learner trains on exactly this many groups per step, so it never waits for
        # groups that will not come (tasks added later join the rotation, not the step size).
        groups_per_step=len(scheduler.step_task_ids(task_ids, body.groups_per_step, 0)),
        request_sha256=digest,
    )
    run = Run.create(
        new_id("run"),
        config,
        name=body.name,
        status=RunStatus.QUEUED if queued else RunStatus.RUNNING,
        policy_version=0,
        idempotency_key=idempotency_key,
    )
    session.add(run)
    try:
        await session.flush()
    except IntegrityError:
        # Two requests with one key raced; the other committed first. The caller retries and gets a replay.
        raise Conflict(f"Idempotency-Key {idempotency_key!r} is being used by a concurrent request") from None
    if not queued:
        await scheduler.start_run(session, run)
    await session.refresh(run)
    return run, True


async def add_tasks(session: AsyncSession, run_id: str, body: TasksAdd) -> TasksAdded:
    """Attach more tasks to a run; later steps sample them. Attaching a task twice is a no-op."""
    run = await _run_or_404(session, run_id, lock=True)
    if run.status in RUN_FINISHED or run.status == RunStatus.STOPPING:
        raise Conflict(f"run {run_id} is {run.status}; tasks can only be added to an active run")
    dataset, tasks = resolve_tasks(body)
    config = read_run_config(run)
    check_teacher(config.teacher, dataset, body.split, tasks)
    task_ids = await upsert_tasks(session, dataset, tasks)
    added = [t for t in task_ids if t not in config.task_ids]
    run.config = config.model_copy(update={"task_ids": config.task_ids + added}).model_dump(mode="json")
    return TasksAdded(run_id=run.id, added=added, tasks=len(config.task_ids) + len(added))


async def stop_run(session: AsyncSession, run_id: str) -> Run:
    """Ask a run to stop (idempotent); the scheduler cancels its queued and ungraded rollouts and finishes the stop,
    runners and graders kill its harnesses and test runs in flight (they poll the run's status)."""
    run = await _run_or_404(session, run_id, lock=True)
    if run.status in (RunStatus.COMPLETED, RunStatus.FAILED):
        raise Conflict(f"run {run_id} already {run.status}")
    if run.status in (RunStatus.QUEUED, RunStatus.PENDING, RunStatus.RUNNING):
        run.status = RunStatus.STOPPING
        await session.flush()
        await session.refresh(run)
    return run


# --- reading ---------------------------------------------------------------------------------------------


def _current_step() -> ScalarSelect[int | None]:
    return select(func.max(Group.step)).where(Group.run_id == Run.id).scalar_subquery()


def _steps_done() -> ScalarSelect[int]:
    return select(func.count(Step.id)).where(Step.run_id == Run.id).scalar_subquery()


def _stored_config(run: Run) -> tuple[RunConfig | None, str | None]:
    """The run's config, or None and why not: a row that no longer validates (written by an older version, or
    by hand) is shown with its error instead of failing every listing that contains it."""
    try:
        return read_run_config(run), None
    except RunConfigError as exc:
        log.warning("%s", exc, extra={"run_id": run.id})
        return None, str(exc)


def _summary(run: Run, current_step: int | None, steps_done: int = 0) -> RunSummary:
    config, config_error = _stored_config(run)
    return RunSummary(
        id=run.id,
        name=run.name,
        kind=RunKind(run.kind),
        status=RunStatus(run.status),
        model=run.model,
        harness=run.harness,
        group_size=run.group_size,
        steps=None if config is None else config.steps,
        current_step=current_step,
        steps_done=steps_done,
        policy_version=run.policy_version,
        error=run.error,
        config_error=config_error,
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
    query = (
        select(Run, _current_step(), _steps_done())
        .order_by(Run.created_at.desc(), Run.id.desc())
        .limit(limit + 1)
    )
    if status is not None:
        query = query.where(Run.status == status)
    if cursor is not None:
        created_at, run_id = decode_cursor(cursor)
        query = query.where(tuple_(Run.created_at, Run.id) < tuple_(created_at, run_id))
    rows = (await session.execute(query)).all()
    items = [_summary(run, step, done) for run, step, done in rows[:limit]]
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
    row = (await session.execute(select(Run, _current_step(), _steps_done()).where(Run.id == run_id))).first()
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
    summary = _summary(run, current_step, len(steps))
    config = None if summary.config_error else read_run_config(run)
    progress = Progress(
        tasks=None if config is None else len(config.task_ids),
        groups=groups,
        rollouts=rollouts,
        rollouts_total=sum(rollouts.values()),
        rollouts_done=sum(rollouts.get(s, 0) for s in ROLLOUT_TERMINAL),
        steps_done=len(steps),
    )
    return RunDetail(
        **summary.model_dump(),
        config=None if config is None else config.model_copy(update={"request_sha256": None}),
        progress=progress,
        step_metrics=[StepMetrics.model_validate(s, from_attributes=True) for s in steps],
        reward_curve=await reward_curve(session, run_id),
        eval_curve=await evals.eval_curve(session, run_id),
    )
