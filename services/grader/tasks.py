"""The Celery side of the grader: task ``grade_rollout`` (queue ``grading``) and the worker's resources.

Thin by design: the task calls ``grade.grade_rollout``, which is idempotent by rollout id, so a redelivered
message (a worker killed mid-grading) grades again at most once and completes the group at most once. A message
of a stopped (or stopping) run grades nothing: ``stopping.close_if_run_stopped`` only closes its bookkeeping, and a
test run in flight is killed by ``stopping.run_stop_check`` once its run is being stopped. Each
worker process opens its database engine, object store, Redis client and sandbox once (lazily, after the
prefork). Start a worker with ``harnessrl worker grader`` (or ``celery -A services.grader.tasks worker -Q grading``).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict
from typing import Any

import redis
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from services.grader.grade import GradingRetry
from services.grader.grade import grade_rollout as grade_rollout_once
from services.grader.stopping import close_if_run_stopped, run_stop_check
from shared.db import make_engine, session_factory
from shared.events import connect
from shared.objectstore import ObjectStore, open_store
from shared.queues import GRADE_ROLLOUT, make_celery
from shared.sandbox import Sandbox
from shared.scratch import sweep_when_worker_starts
from shared.settings import get_settings

log = logging.getLogger(__name__)

app = make_celery(get_settings(), "harnessrl-grader")
sweep_when_worker_starts()  # folders left by a SIGKILLed predecessor on this host


@functools.cache
def _resources() -> tuple[sessionmaker[Session], ObjectStore, Sandbox, redis.Redis]:
    settings = get_settings()
    db = session_factory(make_engine(settings.database_url))
    return db, open_store(settings), Sandbox(settings), connect(settings.redis_url)


# Postgres or Redis briefly unreachable, or a grading that failed for an infrastructure reason with attempts left:
# try again later rather than ack a grading that never happened.
TRANSIENT_ERRORS = (
    OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    GradingRetry,
)


@app.task(
    name=GRADE_ROLLOUT,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=10,
)
def grade_rollout(rollout_id: str) -> dict[str, Any]:
    settings = get_settings()
    db, store, sandbox, redis_client = _resources()
    outcome = close_if_run_stopped(db, redis_client, rollout_id)
    if outcome is None:
        outcome = grade_rollout_once(
            rollout_id,
            db=db,
            store=store,
            sandbox=sandbox,
            redis_client=redis_client,
            timeout_s=settings.grading_timeout_s,
            max_attempts=settings.rollout_retries + 1,
            stop_check=run_stop_check(db, rollout_id),
        )
    log.info(
        "grade %s: %s reward=%s group_entry=%s",
        rollout_id,
        outcome.action,
        outcome.reward,
        outcome.group_entry_id,
    )
    return asdict(outcome)
