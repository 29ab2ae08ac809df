"""The learner controller (``services/learner/controller.py``) with real learner processes on the tiny model, real
Postgres (a scratch database of its own, so the session's other runs are not its business), Redis and S3.

One test walks a controller through its life: two runs' learners side by side and a third waiting for a free
slot (``max_learners=2``); a learner SIGKILLed mid-run restarted, resuming from its checkpoint; a run that ends
has its learner gone and its slot taken by the waiting run; SIGTERM ends every learner. A second test: a run
whose learner cannot start is marked failed after ``learner_max_failures`` tries, not restarted forever.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select, update

from services.learner.controller import LearnerController
from shared.db import make_engine, session_factory, session_scope
from shared.ids import new_id
from shared.models import Run, Step
from shared.scratch_db import scratch_database
from tests.fixtures.learner import LearnerRun

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture
def scratch(settings, settings_env) -> Iterator[tuple[Any, dict[str, str], Any]]:  # type: ignore[no-untyped-def]
    """(settings, child environment, sessionmaker) on a database of this test's own."""
    with scratch_database(settings.database_url, prefix="harnessrl_controller") as url:
        engine = make_engine(url)
        try:
            yield (
                settings.model_copy(update={"database_url": url}),
                {**settings_env, "HARNESSRL_DATABASE_URL": url},
                session_factory(engine),
            )
        finally:
            engine.dispose()


def tick_until(
    controller: LearnerController, what: str, check: Callable[[], Any], timeout_s: float = 240
) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        controller.tick()
        if value := check():
            return value
        time.sleep(0.5)
    raise AssertionError(
        f"timed out after {timeout_s:.0f}s waiting for {what}; learners: {controller.pids()}"
    )


def steps_of(db, run_id: str) -> int:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        return len(session.scalars(select(Step.step).where(Step.run_id == run_id)).all())


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_learners_start_side_by_side_restart_when_killed_and_stop_with_their_run(  # type: ignore[no-untyped-def]
    scratch, store, redis_client, tiny_model_dir
) -> None:
    settings, env, db = scratch
    config = {"groups_per_step": 1, "grpo": {"learning_rate": 1e-3}, "model_dir": str(tiny_model_dir)}
    first, second, waiting = (LearnerRun(db, store, redis_client, new_id("run"), config) for _ in range(3))
    for run in (first, second):
        run.add_group([1.0, 0.0, 0.5, 0.0], seed=1)
    controller = LearnerController(
        settings.model_copy(update={"max_learners": 2}), env, stop_grace_s=20, healthy_after_s=600
    )
    try:
        controller.tick()
        assert set(controller.pids()) == {first.run_id, second.run_id}, "oldest first, two at most"
        tick_until(
            controller,
            "a step of each of the two runs",
            lambda: steps_of(db, first.run_id) == 1 and steps_of(db, second.run_id) == 1,
        )
        assert waiting.run_id not in controller.pids()

        killed = controller.pids()[first.run_id]
        os.kill(killed, signal.SIGKILL)
        restarted = tick_until(
            controller,
            "the killed learner's restart",
            lambda: controller.pids().get(first.run_id, killed) != killed and controller.pids()[first.run_id],
        )
        first.add_group([0.0, 1.0, 0.0, 0.2], seed=2)
        tick_until(controller, "the restarted learner's step 2", lambda: steps_of(db, first.run_id) == 2)
        assert controller.learners[first.run_id].failures == 1

        with session_scope(db) as session:
            session.execute(update(Run).where(Run.id == first.run_id).values(status="completed"))
        tick_until(
            controller, "the ended run's learner to go", lambda: first.run_id not in controller.learners
        )
        assert not alive(restarted)
        tick_until(controller, "the waiting run's learner", lambda: waiting.run_id in controller.pids())
        remaining = list(controller.pids().values())
    finally:
        controller.stop_all()
    assert not any(alive(pid) for pid in remaining)
    with session_scope(db) as session:
        assert session.get(Run, first.run_id).status == "completed"  # type: ignore[union-attr]
        assert session.get(Run, second.run_id).error is None  # type: ignore[union-attr]


def test_a_learner_that_keeps_dying_fails_its_run_instead_of_a_crash_loop(  # type: ignore[no-untyped-def]
    scratch, store, redis_client, tmp_path
) -> None:
    settings, env, db = scratch
    config = {"groups_per_step": 1, "model_dir": str(tmp_path / "no-model-here")}
    run = LearnerRun(db, store, redis_client, new_id("run"), config)
    controller = LearnerController(settings.model_copy(update={"learner_max_failures": 2}), env)
    try:
        tick_until(controller, "the run to be marked failed", lambda: run.run_id not in controller.learners)
        assert controller.pids() == {}
    finally:
        controller.stop_all()
    with session_scope(db) as session:
        row = session.get(Run, run.run_id)
        assert row is not None and row.status == "failed"
        assert row.error and row.error.startswith("its learner died 2 times in a row (last: exit code "), (
            row.error
        )
