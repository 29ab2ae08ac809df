"""The Celery side of the runner: task ``run_rollout`` (queue ``rollouts``) and the worker's resources.

Thin by design: the task calls ``rollout.run_rollout`` and sends the grading message. Each worker process opens
its database engine, object store and sandbox once (lazily, after the prefork) and reuses them.
Start a worker with ``harnessrl worker runner`` (or ``celery -A services.runner.tasks worker -Q rollouts``).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict
from typing import Any

import redis
from sqlalchemy.orm import Session, sessionmaker

from services.runner.rollout import run_rollout as run_rollout_once
from shared.db import make_engine, session_factory
from shared.events import connect
from shared.objectstore import ObjectStore, open_store
from shared.queues import GRADE_ROLLOUT, GRADING_QUEUE, RUN_ROLLOUT, make_celery
from shared.sandbox import Sandbox
from shared.scratch import sweep_when_worker_starts
from shared.settings import get_settings

log = logging.getLogger(__name__)

app = make_celery(get_settings(), "harnessrl-runner")
sweep_when_worker_starts()  # folders left by a SIGKILLed predecessor on this host


@functools.cache
def _resources() -> tuple[sessionmaker[Session], ObjectStore, Sandbox, redis.Redis]:
    settings = get_settings()
    db = session_factory(make_engine(settings.database_url))
    return db, open_store(settings), Sandbox(settings), connect(settings.redis_url)


@app.task(name=RUN_ROLLOUT)
def run_rollout(rollout_id: str) -> dict[str, Any]:
    db, store, sandbox, redis_client = _resources()
    outcome = run_rollout_once(get_settings(), db, store, sandbox, rollout_id, redis_client)
    if outcome.send_to_grading:
        app.send_task(GRADE_ROLLOUT, args=[rollout_id], queue=GRADING_QUEUE)
    log.info("rollout %s: %s (%s)", rollout_id, outcome.action, outcome.status)
    return asdict(outcome)
