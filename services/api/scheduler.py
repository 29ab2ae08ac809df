"""Step scheduling: who creates step k+1's groups and rollouts, and who puts rollouts on the queue.

The api process owns both, in one loop (``Scheduler.run``, started by ``create_app`` unless disabled):

1. **Enqueue (outbox).** Rollout rows are committed first, with ``enqueued_at`` unset (the rollout's queue state,
   ``shared/rollout_records.py: QueueState``); ``enqueue_pending`` then sends ``RUN_ROLLOUT`` by name for each and
   stamps ``enqueued_at``. A crash between the commit and the
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
   - when k+1 reaches ``config.steps`` the run is ``completed`` instead;
   - a run whose stored config no longer validates is ``failed`` with the validation error;
   - when every rollout of step k ended ``harness_error`` or ``infrastructure_error``
     (``shared/statuses.py: RUN_FAILING_OUTCOMES``) the run is ``failed`` with the reason: another step would
     fail the same way (a prompt that does not fit the context, a harness that cannot start, a dead service).

   That is the on-policy rule, and the whole rule when the run's ``grpo.max_policy_lag`` (``L``) is 0 or unset.
   With ``L`` > 0 sampling runs ahead of the learner (bounded staleness, ``run_ahead_version``):
   - step k+1 may start as soon as every group of step k is graded and on the groups stream (``complete``),
     while the learner trains on step k. Waiting for that (rather than starting earlier) keeps the stream in step
     order, so the learner's one-step batches never mix two steps, and keeps one step's rollouts in flight;
   - it starts at the newest version the inference service is done with, ``S``, and only while
     ``policy_version + untrained steps - S <= L``: the learner will train step k+1 at version ``policy_version``
     plus one per step it has not trained yet (each step commits exactly one version), so no token step k+1
     samples (at ``S`` or later) is more than ``L`` versions older than the learner when it trains it. With
     ``L`` = 0 the condition is exactly the on-policy rule (every step trained, ``policy_version`` served);
   - the run is ``completed`` only as on-policy: its last step trained and that version served.
   The learner drops a group older than ``L`` all the same (a version the inference service rejected leaves the
   engine on an older one); the weight swap stays between calls, so one rollout may span versions, each call
   recording its own.
3. **Stop.** A ``stopping`` run (``POST /v1/runs/{id}/stop``) gets its not-yet-started rollouts marked
   ``cancelled`` and becomes ``stopped`` once none is running: the runner polls the run's status about once a
   second while a harness runs and kills a stopping run's harness, ending that rollout ``cancelled`` too
   (``services/runner/rollout.py: stop_check``). Its finished, not yet graded rollouts are cancelled as well; a
   grading in flight is killed by the grader's own stop check and a grading message of the stopped run (late, or
   redelivered after a restart) runs no test (``services/grader/stopping.py``).
4. **Start (the inference pool).** A run is created ``queued`` when ``Settings.pool_exclusive`` is on (the
   default): one full-weight policy is served at a time, so one run at a time may sample from it. ``PoolGate``
   starts the oldest queued run once no run is ``running`` or ``stopping``: it asks the inference updater to
   rebase the pool (the base weights, labelled version 0 of that run: ``shared.events.publish_rebase``), and
   when the pool reports serving that run (``shared.pool``) the run becomes ``running`` with step 0 created.
   With no managed pool (no updater has written the pool's state) it starts at once; with the setting off every
   queued run starts at once and runs share the pool as it is. LoRA runs share the pool with each other (the
   engine keeps the base weights, each run samples with its own adapter and records its own versions): a queued
   LoRA run starts at once while only LoRA runs are active. An eval (``runs.kind = 'eval'``, ``evals.py``) takes the
   pool the same way, FIFO, and the same rebase request makes the updater load what it evaluates under its name; it
   starts once the pool serves that (``PoolGate._serves``). An eval a running run scheduled of its own version
   (``config.eval``) starts beside it, ahead of the queue.
   An SFT run (``runs.kind = 'sft'``) samples nothing: it is created ``running``, never holds the pool, and its
   learner completes it; the scheduler only finishes its stop (it has no rollouts to cancel).
5. **Evals.** An eval run has one step and no learner; it is ``completed`` once every rollout has ended, with its
   figures in its ``evals`` row (``evals.finish_eval``). A training run whose ``config.eval`` is due before step s
   (or after its last step) creates that eval of the version then served and samples on only once it has ended
   (``evals.due_eval``).
6. **Retries.** A rollout the runner put back in the queue (an infrastructure failure, or infrastructure that was
   not ready) carries ``retry_at``; it is sent again once that time has passed.

Every transition is a pure function of database rows, so the loop is idempotent and a restarted api resumes
exactly where the old one stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from services.api import evals
from shared.adapters import adapter_name, get_served_adapter
from shared.db import async_session_scope
from shared.events import connect, publish_rebase
from shared.ids import new_id
from shared.metrics import ROLLOUTS_ENQUEUED
from shared.models import Group, Rollout, Run, Task, Weight
from shared.pool import Served, get_served
from shared.rollout_records import RolloutMeta, awaiting_send, enqueued_now
from shared.run_config import EvalTarget, RunConfigError, read_run_config
from shared.sampling_seed import rollout_seed
from shared.statuses import (
    GROUP_DONE,
    GROUP_ON_STREAM,
    RUN_FAILING_OUTCOMES,
    RUN_STOPPED_REASON,
    WEIGHT_DONE,
    Outcome,
    RolloutStatus,
    RunKind,
    RunStatus,
)
from shared.tensorboard import ScalarLog

log = logging.getLogger(__name__)

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
    config = read_run_config(run)
    task_ids = step_task_ids(config.task_ids, config.groups_per_step, step)
    instance_ids: dict[str, str] = {}
    if config.sampling.seed is not None:
        rows = await session.execute(select(Task.id, Task.instance_id).where(Task.id.in_(task_ids)))
        instance_ids = {task_id: instance_id for task_id, instance_id in rows}
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
        for index in range(config.group_size):
            session.add(
                Rollout(
                    id=new_id("ro"),
                    run_id=run.id,
                    group_id=group.id,
                    task_id=task_id,
                    index_in_group=index,
                    harness=config.harness.name,
                    status=RolloutStatus.QUEUED,
                    sampling_seed=None
                    if config.sampling.seed is None
                    else rollout_seed(config.sampling.seed, instance_ids[task_id], step, index),
                    meta=RolloutMeta().to_json(),
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
    return run.policy_version if status in WEIGHT_DONE else None


async def run_ahead_version(session: AsyncSession, run: Run, lag: int) -> int | None:
    """The version a run whose sampling may run ``lag`` versions ahead starts its next step at: the newest version
    the inference service is done with, ``S`` (0 before any), once ``policy_version + untrained steps - S <= lag``
    (module docstring, 2); else None (wait)."""
    served = await session.scalar(
        select(func.coalesce(func.max(Weight.version), 0)).where(
            Weight.run_id == run.id, Weight.status.in_(WEIGHT_DONE)
        )
    )
    untrained = await session.scalar(
        select(func.count(func.distinct(Group.step))).where(
            Group.run_id == run.id, Group.status.not_in(GROUP_DONE)
        )
    )
    if run.policy_version + (untrained or 0) - (served or 0) > lag:
        return None
    return int(served or 0)


async def advance_run(session: AsyncSession, run_id: str, tensorboard: ScalarLog | None = None) -> str | None:
    """Apply at most one transition to a run; returns what happened (for logs and tests) or None."""
    run = await session.scalar(select(Run).where(Run.id == run_id).with_for_update())
    if run is None:
        return None
    if run.status == RunStatus.STOPPING:
        return await _finish_stopping(session, run)
    if run.status != RunStatus.RUNNING:
        return None
    try:
        config = read_run_config(run)
    except RunConfigError as exc:  # it can never advance, and no other service can work on it either
        run.status = RunStatus.FAILED
        run.error = str(exc)
        return f"failed: {exc}"

    newest = await session.scalar(select(func.max(Group.step)).where(Group.run_id == run.id))
    if (
        newest is None
    ):  # a run whose step 0 was never created (an eval due first, or a crash between two inserts)
        if not config.task_ids:
            return None
        if (waiting := await evals.due_eval(session, run, config, 0)) is not None:
            return waiting or None
        await create_step(session, run, 0, run.policy_version)
        return "step 0 created"
    if run.kind == RunKind.EVAL:  # one step, never trained on: done once every rollout has ended
        return await evals.finish_eval(session, run, await failed_step(session, run.id, 0), tensorboard)

    groups = (await session.scalars(select(Group).where(Group.run_id == run.id, Group.step == newest))).all()
    lag = config.grpo.sampling_lag
    next_step = newest + 1
    trained = all(g.status in GROUP_DONE for g in groups)
    # Not trained yet: only a run that samples ahead moves on, once the step is graded and on the stream.
    may_run_ahead = lag > 0 and next_step < config.steps and all(g.status in GROUP_ON_STREAM for g in groups)
    if not trained and not may_run_ahead:
        return None
    if failure := await failed_step(session, run.id, newest):
        run.status = RunStatus.FAILED
        run.error = failure
        return f"failed: {failure}"
    if lag == 0 or next_step >= config.steps:
        version = await served_policy_version(session, run)
    else:
        version = await run_ahead_version(session, run, lag)
    if version is None:
        return None  # wait until inference serves the learner's new policy (or the learner catches up)

    if (waiting := await evals.due_eval(session, run, config, next_step)) is not None:
        # config.eval: the learner's newest version is evaluated first (with a lag, sampling may already be ahead)
        return waiting or None
    if next_step >= config.steps:
        run.status = RunStatus.COMPLETED
        return f"completed after step {newest}"
    await create_step(session, run, next_step, version)
    return f"step {next_step} created at policy version {version}"


async def failed_step(session: AsyncSession, run_id: str, step: int) -> str | None:
    """Why step ``step`` fails its run (every rollout ended with a harness or infrastructure error), or None."""
    rows = (
        await session.execute(
            select(Rollout.outcome, Rollout.outcome_reason, Rollout.error)
            .join(Group, Group.id == Rollout.group_id)
            .where(Rollout.run_id == run_id, Group.step == step)
            .order_by(Rollout.index_in_group)
        )
    ).all()
    if not rows or any(r.outcome not in RUN_FAILING_OUTCOMES for r in rows):
        return None
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
    first = rows[0]
    return f"every rollout of step {step} failed ({summary}); first: {first.outcome_reason}: {first.error}"


async def _finish_stopping(session: AsyncSession, run: Run) -> str | None:
    cancelled = await session.execute(
        update(Rollout)
        .where(Rollout.run_id == run.id, Rollout.status == RolloutStatus.QUEUED)
        .values(
            status=RolloutStatus.CANCELLED,
            outcome=Outcome.CANCELLED,
            outcome_reason=RUN_STOPPED_REASON,
            error="the run was stopped before this rollout started",
            finished_at=func.now(),
        )
    )
    # Finished but not yet taken by a grader: never graded (its message, when delivered, only closes the group;
    # services/grader/stopping.py). A rollout being graded is left to its grader, whose stop check kills the test
    # run within a second or so; the row lock a grader takes to start makes the two exclusive.
    ungraded = await session.execute(
        update(Rollout)
        .where(Rollout.run_id == run.id, Rollout.status == RolloutStatus.FINISHED)
        .values(
            status=RolloutStatus.CANCELLED,
            outcome=Outcome.CANCELLED,
            outcome_reason=RUN_STOPPED_REASON,
            error="the run was stopped before this rollout was graded",
        )
    )
    running = await session.scalar(
        select(func.count())
        .select_from(Rollout)
        .where(Rollout.run_id == run.id, Rollout.status == RolloutStatus.RUNNING)
    )
    if running:
        n_cancelled = cancelled.rowcount + ungraded.rowcount  # type: ignore[attr-defined]
        return f"stopping: {n_cancelled} cancelled, {running} still running"
    run.status = RunStatus.STOPPED
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
                    Run.status == RunStatus.RUNNING,
                    Rollout.status == RolloutStatus.QUEUED,
                    awaiting_send(),
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
                await session.execute(update(Rollout).where(Rollout.id == rollout_id).values(enqueued_now()))
                ROLLOUTS_ENQUEUED.labels(harness=harness).inc()
                sent += 1
        if not batch:
            return sent


async def start_run(session: AsyncSession, run: Run) -> str:
    """A queued run becomes ``running`` with step 0 created (its rollouts go out with the tick's enqueue), or, when
    its ``config.eval`` is due at step 0, with that eval created first (``advance_run`` creates step 0 after it)."""
    run.status = RunStatus.RUNNING
    if run.kind == RunKind.TRAIN:
        try:
            waiting = await evals.due_eval(session, run, read_run_config(run), 0)
        except RunConfigError:
            waiting = None  # advance_run fails it
        if waiting:
            return f"started; {waiting}"
    await create_step(session, run, 0, policy_version=run.policy_version)
    return "started (step 0 created)"


def _is_lora(run: Run) -> bool:
    try:
        return read_run_config(run).lora is not None
    except RunConfigError:
        return False  # advance_run fails such a run; until then it holds the pool alone


def _target(run: Run) -> EvalTarget | None:
    """An eval's target (None for a training run, or a config that does not validate)."""
    try:
        return read_run_config(run).target
    except RunConfigError:
        return None


class PoolGate:
    """Starts queued runs: one at a time on an exclusive pool, once the pool serves what the run samples from
    (module docstring, 4). ``exclusive=False``: every queued run starts at once.

    What a run samples from: a training run, the base weights as its version 0; an eval, its target
    (``RunConfig.target``: the base weights, a run's published version, a LoRA adapter, a model directory), which
    the updater loads under the eval's name when asked with the same rebase request. An eval a running run
    scheduled of its own version (``config.eval``) starts beside it, ahead of the queue: the pool already serves
    that version, and the run waits for the eval."""

    def __init__(self, redis_url: str | None, exclusive: bool = True, resend_s: float = 10.0) -> None:
        self.redis_url = redis_url
        self.exclusive = exclusive and redis_url is not None
        self.resend_s = resend_s
        self._asked: dict[str, float] = {}  # run → when this process last asked for the rebase
        self._redis: Any = None

    def _pool(self) -> Any:
        if self._redis is None:
            self._redis = connect(self.redis_url or "")
        return self._redis

    def _serves(self, run: Run, served: Served | None) -> bool:
        """Whether the pool serves what ``run`` samples from (``served``: the pool's state, None = unmanaged)."""
        if served is None:
            return True
        target = _target(run)
        if target is not None and target.source == "adapter":  # sampled through its own adapter name
            name = get_served_adapter(self._pool(), run.id)
            return served.ready and name == adapter_name(run.id, target.version)
        if target is not None and target.at_step is not None:  # an eval of the running run's own version
            if _is_lora(
                run
            ):  # version 0 of a LoRA run: the base weights, which the engine keeps for LoRA runs
                return served.ready
            return served.ready and (served.run_id, served.version) == (target.run_id, target.version)
        version = target.version if target is not None else 0
        return served.ready and (served.run_id, served.version) == (run.id, version)

    async def _ask(self, run: Run, served: Served | None) -> list[str]:
        """Ask the updater to serve ``run``'s policy (at most every ``resend_s``)."""
        now = time.monotonic()
        if now - self._asked.get(run.id, -self.resend_s) < self.resend_s:
            return []
        receivers = await asyncio.to_thread(publish_rebase, self._pool(), run.id)
        self._asked[run.id] = now
        state = served.describe() if served is not None else "an unmanaged pool"
        return [f"{run.id}: waiting for the inference pool ({state}); rebase asked of {receivers} updater(s)"]

    async def _start(self, session: AsyncSession, run: Run, how: str) -> list[str]:
        self._asked.pop(run.id, None)
        return [f"{run.id}: {await start_run(session, run)} {how}"]

    async def promote(self, factory: async_sessionmaker[AsyncSession]) -> list[str]:
        async with async_session_scope(factory) as session:
            queued = (
                await session.scalars(
                    select(Run)
                    .where(Run.status == RunStatus.QUEUED)
                    .order_by(Run.created_at, Run.id)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            if not queued:
                return []
            if not self.exclusive:
                return [f"{run.id}: {await start_run(session, run)}" for run in queued]
            # An SFT run samples nothing: it never holds the pool.
            holders = (
                await session.scalars(
                    select(Run).where(
                        Run.status.in_((RunStatus.RUNNING, RunStatus.STOPPING)), Run.kind != RunKind.SFT
                    )
                )
            ).all()
            served = await asyncio.to_thread(get_served, self._pool())
            holder_ids = {h.id for h in holders}
            # An eval a holder scheduled of its own version runs beside it, whatever waits in the queue: the holder
            # samples on only once its eval has ended.
            for run in queued:
                target = _target(run)
                if target is None or target.at_step is None or target.run_id not in holder_ids:
                    continue
                if self._serves(run, served):
                    return await self._start(session, run, f"beside run {target.run_id}")
                if target.source == "adapter":  # loaded under the eval's name beside the run's own adapters
                    return await self._ask(run, served)
                if served is not None and served.ready and served.run_id == target.run_id:
                    # The run's version was never served (its weights were rejected): nothing can sample it.
                    run.status = RunStatus.FAILED
                    run.error = f"{served.describe()}, not version {target.version}, which was never served"
                    return [f"{run.id}: failed: {run.error}"]
                return []  # the pool is starting: the updater's catch-up serves the run's version again
            run = queued[0]  # first come, first served
            if holders:
                # LoRA runs share the pool: the engine keeps the base weights and each run samples with its own
                # adapter, labelled with its own versions. A full-weight run holds the pool alone.
                if not (_is_lora(run) and all(_is_lora(h) for h in holders)):
                    return []
                if self._serves(run, served) or _target(run) is None:
                    return await self._start(session, run, f"beside LoRA run(s) {sorted(holder_ids)}")
                return await self._ask(run, served)
            if self._serves(run, served):
                return await self._start(
                    session, run, f"on {served.describe() if served else 'an unmanaged pool'}"
                )
            return await self._ask(run, served)

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()
            self._redis = None


class Scheduler:
    """The api's background loop: start queued runs, advance every active run, then enqueue what is pending."""

    def __init__(
        self,
        factory: async_sessionmaker[AsyncSession],
        send: SendRollout,
        interval_s: float = 1.0,
        pool: PoolGate | None = None,
        tensorboard: ScalarLog | None = None,
    ) -> None:
        self.factory = factory
        self.send = send
        self.interval_s = interval_s
        self.pool = pool or PoolGate(None, exclusive=False)
        self.tensorboard = tensorboard

    async def tick(self) -> list[str]:
        events: list[str] = []
        try:
            started = await self.pool.promote(self.factory)
        except Exception:  # Redis or the database down: no run starts this tick; the others still advance
            log.exception("starting queued runs failed")
            started = []
        for event in started:
            log.info("run %s", event)
            events.append(event)
        async with async_session_scope(self.factory) as session:
            run_ids = (
                await session.scalars(
                    select(Run.id).where(Run.status.in_((RunStatus.RUNNING, RunStatus.STOPPING)))
                )
            ).all()
        for run_id in run_ids:
            try:
                async with async_session_scope(self.factory) as session:
                    outcome = await advance_run(session, run_id, self.tensorboard)
            except Exception:
                # One run's failure must not hold up the others, nor the sending of their rollouts below.
                log.exception("run %s: advancing failed", run_id, extra={"run_id": run_id})
                continue
            if outcome:
                log.info("run %s: %s", run_id, outcome, extra={"run_id": run_id})
                events.append(f"{run_id}: {outcome}")
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
            self.pool.close()
            if self.tensorboard is not None:
                self.tensorboard.close()
