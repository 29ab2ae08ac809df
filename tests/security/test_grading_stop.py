"""Attack: an answer whose tests never end. A stopped run's gradings must end with it, never run again after a
restart, and one hanging grading must not hold the grading queue for other runs.

Each test makes the hanging answer the way a policy would: a shell-harness rollout through the real runner and
sandbox (the ``attack`` fixture, not graded there) rewrites ``greet.py`` so that the task's test starts a process
that never exits (it carries a unique marker in its argv, so the test finds it on the host). The grading is then
done by real grader Celery worker processes on the real Postgres, Redis and S3, and the run is stopped through the
real api (``POST /v1/runs/{id}/stop``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from services.cli.up import suite_specs
from shared.models import Group, Reward, Rollout, Run
from shared.queues import GRADE_ROLLOUT, GRADING_QUEUE, make_celery
from tests.fixtures.services import fast_recovery_client, fast_recovery_env, stop_process

pytestmark = [pytest.mark.e2e]

FIX = "printf \"def greet():\\n    return 'hello'\\n\" > greet.py"


def _hang(marker: str, busy: bool) -> str:
    """The attack: greet() starts a child that never ends (a busy loop, or a sleeping one to spare the cores)."""
    loop = "while True: pass" if busy else "import time\\nwhile True: time.sleep(0.2)"
    return (
        "cat > greet.py <<'EOF'\n"
        "import subprocess\n"
        "import sys\n\n\n"
        "def greet():\n"
        f'    subprocess.run([sys.executable, "-c", "{loop}", "{marker}"])\n'
        '    return "hello"\n'
        "EOF"
    )


def _processes(marker: str) -> list[int]:
    """Host pids whose argv carries ``marker`` (the sandboxed test's never-ending child)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
    return pids


@contextlib.contextmanager
def _reaped(marker: str) -> Iterator[None]:
    """Whatever happens in the test, no marker process outlives it (before the fix it would run for 600 s)."""
    try:
        yield
    finally:
        for pid in _processes(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _wait(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def _group_status(db, group_id: str) -> str | None:  # type: ignore[no-untyped-def]
    with db() as session:
        return session.scalar(select(Group.status).where(Group.id == group_id))


def _rollout(db, rollout_id: str) -> Rollout:  # type: ignore[no-untyped-def]
    with db() as session:
        row = session.get(Rollout, rollout_id)
        assert row is not None
        session.expunge(row)
        return row


def _rewards(db, rollout_id: str) -> list[Reward]:  # type: ignore[no-untyped-def]
    with db() as session:
        return list(session.scalars(select(Reward).where(Reward.rollout_id == rollout_id)).all())


def _run_status(db, run_id: str) -> str:  # type: ignore[no-untyped-def]
    with db() as session:
        status = session.scalar(select(Run.status).where(Run.id == run_id))
        assert status is not None
        return status


@pytest.fixture
def celery_client(settings):  # type: ignore[no-untyped-def]
    app = make_celery(settings, "harnessrl-tests")
    try:
        yield app
    finally:
        app.close()


def test_stop_kills_a_hanging_grading(attack, toy_task, celery_workers, celery_client, api, db) -> None:  # type: ignore[no-untyped-def]
    """``run stop`` ends a grading in flight within seconds: the test process tree is gone (its core freed), no
    reward is written and the rollout ends ``cancelled`` (reason ``run_stopped``), even with one grading slot."""
    marker = f"harnessrl-hang-{secrets.token_hex(4)}"
    hung = attack(toy_task, _hang(marker, busy=True), grade=False)
    assert hung.status == "finished", hung
    with _reaped(marker):
        celery_workers("services.grader.tasks", [GRADING_QUEUE], concurrency=1)
        celery_client.send_task(GRADE_ROLLOUT, args=[hung.rollout_id], queue=GRADING_QUEUE)
        _wait(lambda: _processes(marker), 90, "the hanging test to start")
        run_id = _rollout(db, hung.rollout_id).run_id

        assert api.post(f"/v1/runs/{run_id}/stop").status_code == 200
        stopped_at = time.monotonic()
        _wait(lambda: not _processes(marker), 10, "the stopped run's test process to be killed")
        _wait(lambda: _rollout(db, hung.rollout_id).status == "cancelled", 10, "the rollout to end cancelled")
        killed_within_s = time.monotonic() - stopped_at

    row = _rollout(db, hung.rollout_id)
    assert (row.outcome, row.outcome_reason) == ("cancelled", "run_stopped"), row.error
    assert _rewards(db, hung.rollout_id) == []
    assert killed_within_s < 10
    _wait(lambda: _run_status(db, run_id) == "stopped", 15, "the run to be stopped")
    # The grader completes the group just after it commits the cancelled rollout, in a transaction of its own, so
    # the scheduler may mark the run stopped a moment before the group completes (a CI run saw it still running).
    _wait(lambda: _group_status(db, row.group_id) == "complete", 10, "the group to complete")


def test_a_stopped_runs_grading_redelivered_after_a_restart_runs_no_test(  # type: ignore[no-untyped-def]
    attack, toy_task, celery_workers, settings, api, db
) -> None:
    """The incident: a grader dies (``harnessrl up`` restarted) with a stopped run's grading in flight; the
    message is redelivered to the new grader, which must run no test and start no sandbox — it only closes the
    bookkeeping (the rollout ``cancelled``, no reward, its group complete)."""
    marker = f"harnessrl-hang-{secrets.token_hex(4)}"
    hung = attack(toy_task, _hang(marker, busy=False), grade=False)
    assert hung.status == "finished", hung
    recovery_s = 12  # the visibility timeout after which a dead worker's message comes back (task_s + 2)
    with _reaped(marker), fast_recovery_client(settings, recovery_s) as client:
        first = celery_workers("services.grader.tasks", [GRADING_QUEUE], fast_recovery_env(recovery_s))
        client.send_task(GRADE_ROLLOUT, args=[hung.rollout_id], queue=GRADING_QUEUE)
        _wait(lambda: _processes(marker), 90, "the hanging test to start")
        first.kill()  # SIGKILL the grader with the grading unacknowledged, as a restart of `up` does
        for pid in _processes(marker):  # the sandbox's own teardown is not what this test is about
            os.kill(pid, signal.SIGKILL)
        row = _rollout(db, hung.rollout_id)
        assert row.status == "grading" and row.meta["grade_attempts"] == 1

        assert api.post(f"/v1/runs/{row.run_id}/stop").status_code == 200
        second = celery_workers("services.grader.tasks", [GRADING_QUEUE], fast_recovery_env(recovery_s))
        # The redelivered message is taken by the new worker and closes the rollout; no test may start meanwhile.
        deadline = time.monotonic() + recovery_s + 60
        while _rollout(db, hung.rollout_id).status == "grading" and time.monotonic() < deadline:
            assert not _processes(marker), "a stopped run's redelivered grading ran its test again"
            time.sleep(0.1)
        time.sleep(1)
        assert not _processes(marker), "a stopped run's redelivered grading ran its test again"
        log = second.log.read_text(errors="replace")

    row = _rollout(db, hung.rollout_id)
    assert (row.status, row.outcome, row.outcome_reason) == ("cancelled", "cancelled", "run_stopped"), log
    assert row.meta["grade_attempts"] == 1  # the redelivery never started a grading attempt
    assert _rewards(db, hung.rollout_id) == []
    assert hung.rollout_id in log and "cancelled" in log
    with db() as session:
        assert session.scalar(select(Group.status).where(Group.id == row.group_id)) == "complete"


def test_a_hanging_grading_does_not_hold_up_another_runs(  # type: ignore[no-untyped-def]
    attack, toy_task, celery_client, settings, settings_env, api, db, tmp_path
) -> None:
    """Run A's answer hangs its test; run B's grading, sent afterwards to the grader as ``harnessrl up`` starts
    it, is graded within seconds while A's test still hangs."""
    marker = f"harnessrl-hang-{secrets.token_hex(4)}"
    hung = attack(toy_task, _hang(marker, busy=False), grade=False)
    honest = attack(toy_task, FIX, grade=False)
    assert (hung.status, honest.status) == ("finished", "finished"), (hung, honest)
    (grader,) = [spec for spec in suite_specs(settings) if spec.name == "grader"]
    log = tmp_path / "grader.log"
    with _reaped(marker), open(log, "wb") as out:
        proc = subprocess.Popen(
            grader.argv, env=settings_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            _wait(lambda: "ready." in log.read_text(errors="replace"), 60, "the grader worker to start")
            celery_client.send_task(GRADE_ROLLOUT, args=[hung.rollout_id], queue=GRADING_QUEUE)
            _wait(lambda: _processes(marker), 90, "run A's hanging test to start")
            sent_at = time.monotonic()
            celery_client.send_task(GRADE_ROLLOUT, args=[honest.rollout_id], queue=GRADING_QUEUE)
            _wait(lambda: _rewards(db, honest.rollout_id), 60, "run B's grading while run A's test hangs")
            graded_within_s = time.monotonic() - sent_at
            assert _processes(marker), "run A's test stopped hanging: B was not graded beside it"
            assert _rollout(db, hung.rollout_id).status == "grading"
            # A's test is not needed any more.
            api.post(f"/v1/runs/{_rollout(db, hung.rollout_id).run_id}/stop")
        finally:
            stop_process(proc)

    (reward,) = _rewards(db, honest.rollout_id)
    assert reward.reward == 1.0 and _rollout(db, honest.rollout_id).status == "graded"
    assert graded_within_s < 60


def test_a_run_stopped_before_its_grading_began_grades_nothing(  # type: ignore[no-untyped-def]
    attack, toy_task, celery_workers, celery_client, api, db
) -> None:
    """A rollout that finished just before its run was stopped: the scheduler cancels it, and its grading message,
    delivered afterwards, starts no test (the answer would hang if it did)."""
    marker = f"harnessrl-hang-{secrets.token_hex(4)}"
    hung = attack(toy_task, _hang(marker, busy=False), grade=False)
    assert hung.status == "finished", hung
    run_id = _rollout(db, hung.rollout_id).run_id
    assert api.post(f"/v1/runs/{run_id}/stop").status_code == 200
    _wait(lambda: _run_status(db, run_id) == "stopped", 15, "the run to be stopped")
    row = _rollout(db, hung.rollout_id)
    assert (row.status, row.outcome, row.outcome_reason) == ("cancelled", "cancelled", "run_stopped")
    with _reaped(marker):
        celery_workers("services.grader.tasks", [GRADING_QUEUE], concurrency=1)
        outcome = celery_client.send_task(GRADE_ROLLOUT, args=[hung.rollout_id], queue=GRADING_QUEUE).get(
            timeout=60
        )
        assert not _processes(marker), "a stopped run's grading ran its test"
    assert (outcome["action"], outcome["reward"]) == ("cancelled", None)
    assert _rewards(db, hung.rollout_id) == []
    with db() as session:
        assert session.scalar(select(Group.status).where(Group.id == row.group_id)) == "complete"
