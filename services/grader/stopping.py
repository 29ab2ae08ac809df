"""A stopped run's gradings: never started, and killed when they are in flight.

``POST /v1/runs/{id}/stop`` marks the run ``stopping`` (``services/api/runs.py``); the scheduler cancels its queued
and finished-but-ungraded rollouts (``services/api/scheduler.py: _finish_stopping``). What is left to the grader,
and lives here (called by ``tasks.py`` around every delivery of ``grade_rollout``):

- ``close_if_run_stopped``: a grading message of a ``stopping``/``stopped`` run — sent before the stop, or
  redelivered after a worker or ``harnessrl up`` restart — runs no test and starts no sandbox; it only closes the
  bookkeeping: an ungraded rollout ends ``cancelled`` (reason ``run_stopped``, no reward) and its group is checked
  for completion, so nothing of a stopped run waits on it.
- ``run_stop_check``: the test run's ``stop_check`` (the sandbox polls it about once a second, like the runner's
  ``services/runner/rollout.py: stop_check``): once the run is being stopped the test process tree is killed with
  ``killed_reason == "run_stopped"`` and the grading ends without a reward, freeing its slot and its core.
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from services.grader.grade import GradeOutcome
from services.grader.group_completion import complete_group_if_done
from shared.db import session_scope
from shared.metrics import GROUPS_COMPLETED
from shared.models import Reward, Rollout, Run
from shared.statuses import KILLED_RUN_STOPPED, RUN_STOPPED_REASON, Outcome, RolloutStatus, RunStatus

# A run in one of these takes no more grading: its gradings in flight are killed, its messages do nothing.
RUN_STOPPED_STATUSES = (RunStatus.STOPPING, RunStatus.STOPPED)
# The error a rollout cancelled by the grader carries (the scheduler writes its own for the rollouts it cancels).
CANCELLED_BEFORE_GRADING = "the run was stopped before this rollout was graded"


def run_stop_check(db: sessionmaker[Session], rollout_id: str) -> Callable[[], str | None]:
    """The test run's ``stop_check``: ``run_stopped`` once the rollout's run is ``stopping`` or ``stopped``."""

    def check() -> str | None:
        with session_scope(db) as session:
            status = session.scalar(
                select(Run.status).join(Rollout, Rollout.run_id == Run.id).where(Rollout.id == rollout_id)
            )
        return KILLED_RUN_STOPPED if status in RUN_STOPPED_STATUSES else None

    return check


def close_if_run_stopped(
    db: sessionmaker[Session], redis_client: redis.Redis, rollout_id: str
) -> GradeOutcome | None:
    """If the rollout's run is being stopped: end the rollout ``cancelled`` unless it was already graded or ended,
    complete its group if that was its last open rollout, and return the outcome (action ``cancelled``, or
    ``already_graded`` with the reward already written). None when the run is not stopped (grade as usual), or
    there is no such rollout (``grade_rollout`` says so)."""
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id, with_for_update=True)
        if rollout is None:
            return None
        run_status = session.scalar(select(Run.status).where(Run.id == rollout.run_id))
        if run_status not in RUN_STOPPED_STATUSES:
            return None
        reward = session.scalar(select(Reward.reward).where(Reward.rollout_id == rollout_id))
        # ``grading`` too: a message redelivered after its worker died, or a second delivery while the first is
        # being killed by its stop check; neither may run the test again.
        if reward is None and rollout.status in (RolloutStatus.FINISHED, RolloutStatus.GRADING):
            rollout.status = RolloutStatus.CANCELLED
            rollout.outcome, rollout.outcome_reason = Outcome.CANCELLED, RUN_STOPPED_REASON
            rollout.error = CANCELLED_BEFORE_GRADING
        group_id, run_id = rollout.group_id, rollout.run_id
    entry = complete_group_if_done(db, redis_client, group_id) if group_id is not None else None
    if entry is not None:
        GROUPS_COMPLETED.labels(run_id).inc()
    action = "already_graded" if reward is not None else "cancelled"
    return GradeOutcome(rollout_id, action, reward, entry)
