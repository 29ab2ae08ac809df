"""Evaluations: an eval is a run of kind ``eval`` (one step: every task × ``samples`` rollouts, graded, never
trained on) plus its ``evals`` row (what it evaluates, and its figures once it has ended).

Who creates one: ``POST /v1/evals`` (``create_eval``; ``harnessrl eval``), or the scheduler for a training run
whose ``config.eval`` is due (``due_eval``). Who finishes one: the scheduler, once every rollout of the eval has
ended (``finish_eval``): pass@1 and pass@k with 95 % intervals (``shared/eval_stats.py``) go into the ``evals``
row and TensorBoard, and the eval run is ``completed`` (``failed`` when no rollout could be graded).

How the right policy is served: the eval's config carries its target (``RunConfig.target``) and it is created
``queued``; ``scheduler.PoolGate`` hands it the inference pool like a run (FIFO), and the inference updater loads
the target when asked (``services/inference/updater.py: rebase``). An eval a training run scheduled of its own
current version runs beside it instead (the pool already serves that version; the run samples on only once the
eval has ended, so no call of the eval is sampled by a newer version).

Every check of a request happens before anything is written: a bad dataset, split, harness, run, version or model
directory is an ``Invalid`` (422) naming the field, and creates nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from services.api import runs
from services.api.errors import Invalid, NotFound
from services.api.schemas import (
    EvalCreate,
    EvalDetail,
    EvalPoint,
    EvalResult,
    EvalSample,
    EvalSamples,
    TaskSource,
)
from services.api.task_sources import resolve_tasks
from services.api.teachers import check_teacher
from shared.adapters import is_adapter_key
from shared.eval_stats import eval_figures
from shared.ids import new_id
from shared.models import Call, Eval, Reward, Rollout, Run, Task, Weight
from shared.run_config import EvalTarget, IssueShown, RunConfig, TeacherConfig, read_run_config
from shared.statuses import (
    ROLLOUT_TERMINAL,
    RUN_FINISHED,
    RunKind,
    RunStatus,
    WeightStatus,
)
from shared.tensorboard import ScalarLog

log = logging.getLogger(__name__)


# --- creating -----------------------------------------------------------------------------------------------


def check_model_dir(path: str) -> None:
    """A model directory the inference updater can load: absolute, with a config.json and safetensors."""
    folder = Path(path)
    if not folder.is_absolute():
        raise Invalid.field("body.model_dir", "must be an absolute path on the api and inference host")
    if not folder.is_dir():
        raise Invalid.field("body.model_dir", f"{path} is not a directory")
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        raise Invalid.field("body.model_dir", f"{path} holds no config.json and *.safetensors weights")


async def resolve_target(session: AsyncSession, body: EvalCreate) -> tuple[EvalTarget, Run | None]:
    """What ``body`` asks to evaluate, checked against the database (422 naming the field when it cannot be)."""
    if body.model_dir is not None:
        check_model_dir(body.model_dir)
        return EvalTarget(source="model_dir", model_dir=body.model_dir), None
    if body.run_id is None:
        return EvalTarget(source="base"), None
    source_run = await session.scalar(select(Run).where(Run.id == body.run_id))
    if source_run is None:
        raise Invalid.field("body.run_id", f"no run {body.run_id!r}")
    if source_run.kind not in (RunKind.TRAIN, RunKind.SFT):
        raise Invalid.field("body.run_id", f"{body.run_id} is an eval, not a training or SFT run")
    version = source_run.policy_version if body.version is None else body.version
    if version == 0:
        init = read_run_config(source_run).init
        if init is not None and init.version:  # its version 0 is the version it started from (RunSpec.init)
            return EvalTarget(source="weights", run_id=init.run_id, version=init.version), source_run
        return EvalTarget(source="base", run_id=source_run.id), source_run
    weight = await session.scalar(
        select(Weight).where(Weight.run_id == source_run.id, Weight.version == version)
    )
    if weight is None or weight.status in (WeightStatus.REJECTED, WeightStatus.FAILED):
        servable = (
            await session.scalars(
                select(Weight.version)
                .where(
                    Weight.run_id == source_run.id,
                    Weight.status.not_in((WeightStatus.REJECTED, WeightStatus.FAILED)),
                )
                .order_by(Weight.version)
            )
        ).all()
        have = (
            f"versions 0 (base) and {', '.join(map(str, servable))}" if servable else "only version 0 (base)"
        )
        why = "was not published" if weight is None else f"was {weight.status}: {weight.error}"
        raise Invalid.field("body.version", f"version {version} of run {source_run.id} {why}; it has {have}")
    source = "adapter" if is_adapter_key(weight.object_key) else "weights"
    return EvalTarget(source=source, run_id=source_run.id, version=version), source_run


def _eval_config(
    *, model: str, harness: Any, samples: int, sampling: Any, limits: Any, reward_fn: str, dataset: str,
    task_ids: list[str], target: EvalTarget, source_run: Run | None, issue: IssueShown = "shown",
    teacher: TeacherConfig | None = None,
) -> RunConfig:  # fmt: skip
    # A LoRA run's versions are sampled through its adapters (version 0: the base weights, no adapter): the eval
    # of one is a LoRA run for the gateway and the pool.
    lora = read_run_config(source_run).lora if source_run is not None else None
    return RunConfig(
        model=model, harness=harness, group_size=samples, steps=1, reward_fn=reward_fn, sampling=sampling,
        limits=limits, lora=lora, dataset=dataset, task_ids=task_ids, groups_per_step=len(task_ids),
        target=target, issue=issue, teacher=teacher,
    )  # fmt: skip


async def _insert_eval(session: AsyncSession, config: RunConfig, name: str, split: str | None) -> Run:
    assert config.target is not None
    run = Run.create(
        new_id("eval"), config, name=name, status=RunStatus.QUEUED, policy_version=config.target.version
    )
    session.add(run)
    await session.flush()
    session.add(
        Eval(
            run_id=run.id, source_run_id=config.target.run_id, version=config.target.version,
            source=config.target.source, model_dir=config.target.model_dir, at_step=config.target.at_step,
            dataset=config.dataset, split=split, harness=config.harness.name, samples_per_task=config.group_size,
            seed=config.sampling.seed, tasks=len(config.task_ids),
        )
    )  # fmt: skip
    await session.flush()
    await session.refresh(run)
    return run


async def create_eval(session: AsyncSession, body: EvalCreate, served_model: str) -> Run:
    """Create an eval (queued for the inference pool) and upsert its tasks; nothing is written on a bad request."""
    dataset, tasks = resolve_tasks(body)
    check_teacher(body.teacher, dataset, body.split, tasks)
    target, source_run = await resolve_target(session, body)
    task_ids = await runs.upsert_tasks(session, dataset, tasks)
    sampling = body.sampling if body.seed is None else body.sampling.model_copy(update={"seed": body.seed})
    config = _eval_config(
        model=body.model or served_model, harness=body.harness, samples=body.samples, sampling=sampling,
        limits=body.limits, reward_fn=body.reward_fn, dataset=dataset, task_ids=task_ids, target=target,
        source_run=source_run, issue=body.issue, teacher=body.teacher,
    )  # fmt: skip
    return await _insert_eval(session, config, body.name, body.split)


async def due_eval(session: AsyncSession, run: Run, config: RunConfig, at_step: int) -> str | None:
    """For a training run about to sample step ``at_step`` (or, at ``at_step == steps``, to complete): None when
    it may go on, else why it waits — its ``config.eval`` is due here and the eval it scheduled has not ended
    (created now if need be; "" when it was already waiting)."""
    every = config.eval.every_steps
    if every is None or at_step % every != 0 or at_step > config.steps:
        return None
    existing = await session.scalar(
        select(Run.status)
        .join(Eval, Eval.run_id == Run.id)
        .where(Eval.source_run_id == run.id, Eval.at_step == at_step)
    )
    if existing is not None:
        return None if existing in RUN_FINISHED else ""
    spec = config.eval
    split = spec.split
    if spec.dataset is not None:
        try:
            dataset, tasks = resolve_tasks(TaskSource(dataset=spec.dataset, split=spec.split))
        except Invalid as exc:  # checked at creation; a dataset removed since cannot be evaluated
            run.status, run.error = RunStatus.FAILED, f"config.eval: {exc.message}"
            return f"failed: {run.error}"
        task_ids = await runs.upsert_tasks(session, dataset, tasks)
    else:
        dataset, task_ids, split = config.dataset, list(config.task_ids), None
    version = run.policy_version
    # Version 0 of a run started from another run's version (RunSpec.init) is those weights, not the base.
    base = version == 0 and (config.init is None or not config.init.version)
    source = "base" if base else ("adapter" if config.lora is not None else "weights")
    target = EvalTarget(source=source, run_id=run.id, version=version, at_step=at_step)
    eval_config = _eval_config(
        model=config.model, harness=spec.harness or config.harness, samples=spec.samples or config.group_size,
        sampling=config.sampling, limits=config.limits, reward_fn=config.reward_fn, dataset=dataset,
        task_ids=task_ids, target=target, source_run=run,
    )  # fmt: skip
    created = await _insert_eval(session, eval_config, f"{run.name or run.id} eval @ step {at_step}", split)
    return f"eval {created.id} of version {version} created before step {at_step}"


# --- finishing ----------------------------------------------------------------------------------------------

PER_TASK = (
    select(
        Rollout.task_id,
        func.count(Reward.id),
        func.count(Reward.id).filter(Reward.resolved),
        func.count().filter(Reward.id.is_(None)),
        func.sum(Reward.reward),
    )
    .outerjoin(Reward, Reward.rollout_id == Rollout.id)
    .group_by(Rollout.task_id)
)


async def finish_eval(
    session: AsyncSession, run: Run, failure: str | None, tensorboard: ScalarLog | None
) -> str | None:
    """Once every rollout of eval ``run`` has ended: its figures into its ``evals`` row (and TensorBoard), the run
    ``completed`` (``failed`` with ``failure``, or when nothing could be graded). None while rollouts remain."""
    open_rollouts = await session.scalar(
        select(func.count())
        .select_from(Rollout)
        .where(Rollout.run_id == run.id, Rollout.status.not_in(ROLLOUT_TERMINAL))
    )
    total = await session.scalar(select(func.count()).select_from(Rollout).where(Rollout.run_id == run.id))
    if open_rollouts or not total:
        return None
    row = await session.get(Eval, run.id, with_for_update=True)
    if row is None:
        run.status, run.error = RunStatus.FAILED, f"eval {run.id} has no evals row"
        return f"failed: {run.error}"
    per_task = (await session.execute(PER_TASK.where(Rollout.run_id == run.id))).all()
    figures = eval_figures(((int(n), int(c)) for _, n, c, _, _ in per_task), row.samples_per_task)
    reward_sum = sum(float(s or 0.0) for *_, s in per_task)
    row.samples, row.passed = figures.samples, figures.passed
    row.failed = sum(int(f) for _, _, _, f, _ in per_task)
    row.pass_at_1, (row.pass_at_1_low, row.pass_at_1_high) = figures.pass_at_1, figures.pass_at_1_interval
    row.pass_at_k, (row.pass_at_k_low, row.pass_at_k_high) = figures.pass_at_k, figures.pass_at_k_interval
    row.reward_mean = reward_sum / figures.samples if figures.samples else None
    row.finished_at = datetime.now(UTC)
    if failure is None and figures.samples == 0:
        failure = "no rollout of the eval was graded"
    run.status = RunStatus.FAILED if failure else RunStatus.COMPLETED
    run.error = failure
    if tensorboard is not None and figures.samples:
        scalars = {
            "eval/pass_at_1": figures.pass_at_1,
            "eval/pass_at_1_low": figures.pass_at_1_interval[0],
            "eval/pass_at_1_high": figures.pass_at_1_interval[1],
            f"eval/pass_at_{figures.k}": figures.pass_at_k,
            "eval/reward_mean": row.reward_mean,
            "eval/samples": figures.samples,
        }
        tensorboard.write(run.id, row.version, scalars)
        if row.at_step is not None and row.source_run_id is not None:
            tensorboard.write(row.source_run_id, row.at_step, scalars | {"eval/version": row.version})
    outcome = f"pass@1 {figures.pass_at_1:.3f} over {figures.samples} samples"
    return f"failed: {failure} ({outcome})" if failure else f"completed: {outcome}"


# --- reading ------------------------------------------------------------------------------------------------


async def eval_detail(session: AsyncSession, eval_id: str) -> EvalDetail:
    found = (
        await session.execute(select(Run, Eval).join(Eval, Eval.run_id == Run.id).where(Run.id == eval_id))
    ).first()
    if found is None:
        raise NotFound(f"no eval {eval_id!r}")
    run, row = found
    statuses = (
        await session.execute(
            select(Rollout.status, func.count()).where(Rollout.run_id == eval_id).group_by(Rollout.status)
        )
    ).all()
    versions = (
        await session.scalars(
            select(Call.policy_version)
            .join(Rollout, Rollout.id == Call.rollout_id)
            .where(Rollout.run_id == eval_id)
            .distinct()
            .order_by(Call.policy_version)
        )
    ).all()
    result = None
    if row.samples is not None and row.pass_at_1 is not None:
        result = EvalResult(
            tasks=row.tasks, samples=row.samples, failed=row.failed or 0, passed=row.passed or 0,
            k=row.samples_per_task, pass_at_1=row.pass_at_1,
            pass_at_1_interval=(row.pass_at_1_low or 0.0, row.pass_at_1_high or 0.0), pass_at_k=row.pass_at_k or 0.0,
            pass_at_k_interval=(row.pass_at_k_low or 0.0, row.pass_at_k_high or 0.0), reward_mean=row.reward_mean,
        )  # fmt: skip
    return EvalDetail(
        id=run.id, name=run.name, status=RunStatus(run.status), error=run.error, source=row.source,  # type: ignore[arg-type]
        source_run_id=row.source_run_id, version=row.version, model_dir=row.model_dir, at_step=row.at_step,
        dataset=row.dataset, split=row.split, harness=row.harness, samples_per_task=row.samples_per_task,
        seed=row.seed, rollouts_total=sum(n for _, n in statuses),
        rollouts_done=sum(n for s, n in statuses if s in ROLLOUT_TERMINAL), policy_versions=list(versions),
        result=result, created_at=row.created_at, finished_at=row.finished_at,
    )  # fmt: skip


async def eval_samples(session: AsyncSession, eval_id: str) -> EvalSamples:
    """Every sample of the eval with its seed and outcome (``harnessrl eval compare`` pairs two evals' samples)."""
    if await session.get(Eval, eval_id) is None:
        raise NotFound(f"no eval {eval_id!r}")
    rows = (
        await session.execute(
            select(
                Task.instance_id, Rollout.id, Rollout.index_in_group, Rollout.sampling_seed, Reward.resolved
            )
            .join(Task, Task.id == Rollout.task_id)
            .outerjoin(Reward, Reward.rollout_id == Rollout.id)
            .where(Rollout.run_id == eval_id)
            .order_by(Task.instance_id, Rollout.index_in_group)
        )
    ).all()
    samples = [
        EvalSample(
            instance_id=instance_id, rollout_id=rollout_id, index=index, sampling_seed=seed, passed=resolved
        )
        for instance_id, rollout_id, index, seed, resolved in rows
    ]
    return EvalSamples(eval_id=eval_id, samples=samples)


async def eval_curve(session: AsyncSession, run_id: str) -> list[EvalPoint]:
    rows = (
        await session.execute(
            select(Eval, Run.status)
            .join(Run, Run.id == Eval.run_id)
            .where(Eval.source_run_id == run_id, Eval.at_step.is_not(None))
            .order_by(Eval.at_step, case((Run.status == RunStatus.COMPLETED, 0), else_=1))
        )
    ).all()
    return [
        EvalPoint(
            eval_id=e.run_id,
            status=RunStatus(status),
            at_step=e.at_step,
            version=e.version,
            samples=e.samples,
            pass_at_1=e.pass_at_1,
            pass_at_1_low=e.pass_at_1_low,
            pass_at_1_high=e.pass_at_1_high,
        )  # fmt: skip
        for e, status in rows
    ]
