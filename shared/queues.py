"""The Celery app on Redis: queues ``rollouts`` and ``grading``, at-least-once delivery.

Delivery rules (docs/design.md#at-least-once-delivery): a task is acknowledged only after it returns (``acks_late``), a worker
that dies mid-task puts it back (``reject_on_worker_lost``), each worker process holds one message at a time
(prefetch 1), the visibility timeout exceeds the longest task, and unacked messages of a dead worker are restored
within seconds. Redelivery is therefore normal: every task must be idempotent, keyed by a business id (a rollout
id), never by the Celery task id.

Tasks are addressed by name (``RUN_ROLLOUT``, ``GRADE_ROLLOUT``), so the api enqueues work without importing the
runner or grader packages; each worker imports its own task module.
"""

from __future__ import annotations

from celery import Celery
from kombu import Queue

from shared.settings import Settings

ROLLOUTS_QUEUE = "rollouts"
GRADING_QUEUE = "grading"
RUN_ROLLOUT = "harnessrl.run_rollout"
GRADE_ROLLOUT = "harnessrl.grade_rollout"


def make_celery(settings: Settings, name: str = "harnessrl", *, restore_interval_s: float = 1.0) -> Celery:
    app = Celery(name, broker=settings.redis_url, backend=settings.redis_url)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_track_started=True,
        result_expires=24 * 3600,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": settings.resolved_visibility_timeout_s,
            "unacked_restore_interval": restore_interval_s,
            "unacked_restore_throttle": 1,
            # kombu holds a lock while restoring; a worker SIGKILLed while holding it would block restores for
            # the default 300 s.
            "unacked_mutex_expire": 10,
        },
        task_queues=(Queue(ROLLOUTS_QUEUE), Queue(GRADING_QUEUE)),
        task_default_queue=ROLLOUTS_QUEUE,
        task_routes={RUN_ROLLOUT: {"queue": ROLLOUTS_QUEUE}, GRADE_ROLLOUT: {"queue": GRADING_QUEUE}},
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app


def worker_argv(queue: str, concurrency: int, hostname: str, loglevel: str = "info") -> list[str]:
    """``celery worker`` arguments for one of our queues (prefork pool, no gossip/mingle/heartbeat chatter)."""
    return [
        "worker",
        "--pool=prefork",
        f"--concurrency={concurrency}",
        f"--hostname={hostname}",
        f"--queues={queue}",
        f"--loglevel={loglevel}",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
