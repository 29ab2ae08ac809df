"""Celery on Redis through separate worker processes: round trip, crash redelivery, idempotent double delivery."""

import secrets
import time

import pytest
from sqlalchemy import text

from tests.fixtures.celery_app import SCHEMA
from tests.fixtures.services import fast_recovery_client, fast_recovery_env

pytestmark = pytest.mark.integration

FAST_RECOVERY = fast_recovery_env(2)


@pytest.fixture
def client(settings):  # type: ignore[no-untyped-def]
    with fast_recovery_client(settings, 2) as app:
        yield app


@pytest.fixture
def jobs(db_engine):  # type: ignore[no-untyped-def]
    with db_engine.begin() as conn:
        conn.execute(text(SCHEMA))

    def state(job_id: str) -> tuple[int, bool, int]:
        with db_engine.connect() as conn:
            row = conn.execute(
                text("SELECT attempts, done FROM test_jobs WHERE id=:i"), {"i": job_id}
            ).first()
            effects = conn.execute(
                text("SELECT count(*) FROM test_effects WHERE job_id=:i"), {"i": job_id}
            ).scalar()
        return (row[0], row[1], effects) if row else (0, False, effects)

    return state


def _wait(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def test_round_trip_through_worker_process(client, celery_workers) -> None:  # type: ignore[no-untyped-def]
    worker = celery_workers("tests.fixtures.celery_app", ["rollouts"], FAST_RECOVERY)
    result = client.send_task("tests.add", args=[2, 3], queue="rollouts")
    assert result.get(timeout=30) == 5
    assert worker.proc.poll() is None


def test_sigkilled_worker_task_runs_again_to_completion(client, celery_workers, jobs) -> None:  # type: ignore[no-untyped-def]
    job_id = f"job_{secrets.token_hex(4)}"
    first = celery_workers("tests.fixtures.celery_app", ["grading"], FAST_RECOVERY)
    client.send_task("tests.do_job", args=[job_id, 3.0], queue="grading")
    _wait(lambda: jobs(job_id)[0] == 1, 30, "first attempt to start")
    first.kill()  # SIGKILL the whole worker (main process and pool) mid-task
    assert jobs(job_id) == (1, False, 0)
    celery_workers("tests.fixtures.celery_app", ["grading"], FAST_RECOVERY)
    _wait(lambda: jobs(job_id)[1], 60, "redelivered task to finish")
    attempts, done, effects = jobs(job_id)
    assert attempts == 2 and done and effects == 1


def test_double_delivery_does_the_work_once(client, celery_workers, jobs) -> None:  # type: ignore[no-untyped-def]
    job_id = f"job_{secrets.token_hex(4)}"
    celery_workers("tests.fixtures.celery_app", ["grading"], FAST_RECOVERY, concurrency=2)
    a = client.send_task("tests.do_job", args=[job_id, 0.5], queue="grading")
    b = client.send_task("tests.do_job", args=[job_id, 0.5], queue="grading")
    outcomes = sorted([a.get(timeout=30), b.get(timeout=30)])
    assert outcomes == ["done", "duplicate"]
    assert jobs(job_id) == (2, True, 1)
