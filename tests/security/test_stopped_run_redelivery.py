"""A stopped run's rollout is never run again: the runner's delivery of a rollout whose run is stopping (redelivered
after its worker died mid-attempt, or sent before the stop) starts no sandbox, removes what the dead attempt
recorded, and ends the rollout ``cancelled`` (the grader's side of the same rule is ``test_grading_stop.py``)."""

from __future__ import annotations

import pytest

from services.runner.rollout import Attempt, claim, run_rollout
from shared.db import session_scope
from shared.models import Rollout, Run
from shared.statuses import RolloutStatus, RunStatus

pytestmark = [pytest.mark.e2e]


def test_a_stopped_runs_rollout_redelivered_after_its_runner_died_runs_nothing(  # type: ignore[no-untyped-def]
    dead_upstream_gateway, sandbox, db, store, redis_client, make_rollouts, toy_task
) -> None:
    settings = dead_upstream_gateway.settings
    run_id, _, [rollout_id] = make_rollouts(
        toy_task, {"name": "shell", "command": "sleep 600 # {instruction}"}
    )
    first = claim(
        settings, db, store, rollout_id
    )  # the attempt whose worker then dies: the row stays running
    assert isinstance(first, Attempt)
    with session_scope(db) as session:
        run = session.get(Run, run_id)
        assert run is not None
        run.status = RunStatus.STOPPING

    outcome = run_rollout(settings, db, store, sandbox, rollout_id, redis_client)  # Celery's redelivery

    assert outcome.action == "cancelled", outcome
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        assert rollout.status == RolloutStatus.CANCELLED
        assert rollout.outcome_reason == "run_stopped"
        assert rollout.attempt == first.attempt  # no new attempt was started
        assert rollout.patch_key is None and rollout.logs_key is None  # no harness ran
    # And again: a closed rollout stays closed.
    assert run_rollout(settings, db, store, sandbox, rollout_id, redis_client).action == "already_done"
