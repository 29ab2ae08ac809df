"""The grader through real Celery worker processes, Postgres, Redis and the S3 server: rewards, exactly-once
group completion, redelivery, and a grader SIGKILLed in the middle of grading."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from services.grader.grade import GradingRetry, grade_rollout
from services.grader.group_completion import append_group_once, complete_group_if_done
from shared.datasets import load_dataset, reference_patch
from shared.db import session_scope
from shared.events import groups_stream
from shared.models import Group, Reward, Rollout
from shared.queues import GRADE_ROLLOUT, GRADING_QUEUE
from shared.tasks import DEFAULT_TEST_COMMAND, DirSource
from tests.fixtures.services import fast_recovery_client, fast_recovery_env, stop_process

pytestmark = pytest.mark.integration

TASK = next(t for t in load_dataset("swe_mini") if t.instance_id == "textkit-1")
SOLUTION = reference_patch("swe_mini", TASK.instance_id)
FAST_RECOVERY = fast_recovery_env(6)


@pytest.fixture
def client(settings):  # type: ignore[no-untyped-def]
    with fast_recovery_client(settings, 6) as app:
        yield app


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def _group(db, group_id: str) -> Group:  # type: ignore[no-untyped-def]
    with db() as session:
        group = session.get(Group, group_id)
        assert group is not None
        return group


def _rewards(db, rollout_ids: list[str]) -> dict[str, list[Reward]]:  # type: ignore[no-untyped-def]
    with db() as session:
        rows = session.scalars(select(Reward).where(Reward.rollout_id.in_(rollout_ids))).all()
    out: dict[str, list[Reward]] = {rid: [] for rid in rollout_ids}
    for row in rows:
        out[row.rollout_id].append(row)
    return out


def test_group_is_graded_and_appended_once(
    client, celery_workers, finished_group, db, store, redis_client
) -> None:  # type: ignore[no-untyped-def]
    run_id, group_id, ids = finished_group(TASK, [SOLUTION, "", SOLUTION, "not a patch\n"])
    celery_workers("services.grader.tasks", [GRADING_QUEUE], FAST_RECOVERY, concurrency=2)
    results = [client.send_task(GRADE_ROLLOUT, args=[rid], queue=GRADING_QUEUE) for rid in ids]
    outcomes = [r.get(timeout=120) for r in results]
    assert [o["action"] for o in outcomes] == ["graded"] * 4

    rewards = _rewards(db, ids)
    assert [rewards[rid][0].reward for rid in ids] == [1.0, 0.0, 1.0, 0.0]
    assert [rewards[rid][0].outcome for rid in ids] == ["graded", "graded", "graded", "patch_failed"]
    first = rewards[ids[0]][0]
    assert first.resolved and set(first.tests["FAIL_TO_PASS"].values()) == {"passed"}
    assert "outcome graded, reward 1.0" in store.get_bytes(first.logs_key).decode()

    group = _group(db, group_id)
    entries = redis_client.xrange(groups_stream(run_id))
    assert group.status == "complete" and len(entries) == 1
    entry_id, fields = entries[0]
    assert group.stream_entry_id == entry_id and fields["group_id"] == group_id
    assert fields["graded"] == "4" and float(fields["reward_mean"]) == 0.5
    assert [o["group_entry_id"] for o in outcomes].count(entry_id) == 1
    with db() as session:
        statuses = session.scalars(select(Rollout.status).where(Rollout.group_id == group_id)).all()
        assert set(statuses) == {"graded"}

    # A redelivered grading message: no second reward, no second stream entry.
    again = client.send_task(GRADE_ROLLOUT, args=[ids[1]], queue=GRADING_QUEUE).get(timeout=60)
    assert again["action"] == "already_graded" and again["reward"] == 0.0
    assert [len(v) for v in _rewards(db, ids).values()] == [1, 1, 1, 1]
    assert len(redis_client.xrange(groups_stream(run_id))) == 1


def test_group_with_a_failed_rollout_completes(
    client, celery_workers, finished_group, db, redis_client
) -> None:  # type: ignore[no-untyped-def]
    run_id, group_id, ids = finished_group(
        TASK, [SOLUTION, ""], statuses=["finished", "failed"], reward_fn="fraction_passed"
    )
    celery_workers("services.grader.tasks", [GRADING_QUEUE], FAST_RECOVERY)
    outcomes = [
        client.send_task(GRADE_ROLLOUT, args=[rid], queue=GRADING_QUEUE).get(timeout=120) for rid in ids
    ]
    assert [o["action"] for o in outcomes] == ["graded", "not_gradable"]
    rewards = _rewards(db, ids)
    assert rewards[ids[0]][0].reward == 1.0 and rewards[ids[0]][0].reward_fn == "fraction_passed"
    assert rewards[ids[1]] == []  # a rollout that failed for good gets no reward
    ((_, fields),) = redis_client.xrange(groups_stream(run_id))
    assert (fields["graded"], fields["failed"]) == ("1", "1") and _group(db, group_id).status == "complete"


def test_sigkilled_grader_regrades_once_and_the_group_completes_once(  # type: ignore[no-untyped-def]
    client, celery_workers, finished_group, db, redis_client
) -> None:
    slow = TASK.model_copy(update={"test_command": "sleep 4; " + DEFAULT_TEST_COMMAND})
    run_id, group_id, ids = finished_group(slow, [SOLUTION, ""])
    first = celery_workers("services.grader.tasks", [GRADING_QUEUE], FAST_RECOVERY)
    for rid in ids:
        client.send_task(GRADE_ROLLOUT, args=[rid], queue=GRADING_QUEUE)

    def grading_started() -> bool:
        with db() as session:
            return "grading" in session.scalars(select(Rollout.status).where(Rollout.id.in_(ids))).all()

    _wait(grading_started, 60, "grading to start")
    first.kill()  # SIGKILL the worker and its pool in the middle of a test run
    with db() as session:
        killed = session.scalars(
            select(Rollout).where(Rollout.id.in_(ids), Rollout.status == "grading")
        ).all()
        assert len(killed) == 1 and killed[0].meta["grade_attempts"] == 1
        killed_id = killed[0].id
    assert _rewards(db, ids)[killed_id] == []

    celery_workers("services.grader.tasks", [GRADING_QUEUE], FAST_RECOVERY)
    _wait(lambda: _group(db, group_id).status == "complete", 120, "the group to complete after redelivery")
    rewards = _rewards(db, ids)
    assert [len(rewards[rid]) for rid in ids] == [1, 1]
    assert [rewards[rid][0].reward for rid in ids] == [1.0, 0.0]
    with db() as session:
        assert session.get(Rollout, killed_id).meta["grade_attempts"] == 2  # type: ignore[union-attr]
    entries = redis_client.xrange(groups_stream(run_id))
    assert len(entries) == 1 and entries[0][0] == _group(db, group_id).stream_entry_id


def test_concurrent_completion_checks_append_once(finished_group, db, redis_client) -> None:  # type: ignore[no-untyped-def]
    run_id, group_id, _ = finished_group(TASK, ["", "", ""], statuses=["graded", "graded", "failed"])
    barrier = threading.Barrier(8)
    results: list[str | None] = []

    def check() -> None:
        barrier.wait()
        results.append(complete_group_if_done(db, redis_client, group_id))

    threads = [threading.Thread(target=check) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [r for r in results if r is not None]
    assert len(winners) == 1 and len(redis_client.xrange(groups_stream(run_id))) == 1
    assert _group(db, group_id).stream_entry_id == winners[0]


def test_crash_between_stream_append_and_commit_does_not_append_twice(
    finished_group, db, redis_client
) -> None:  # type: ignore[no-untyped-def]
    run_id, group_id, _ = finished_group(TASK, ["", ""], statuses=["graded", "graded"])
    # A grader appended the group and died before its transaction committed: the row still says "running".
    orphan_entry = append_group_once(redis_client, run_id, group_id, {"graded": "2"})
    assert _group(db, group_id).status == "running"
    assert complete_group_if_done(db, redis_client, group_id) == orphan_entry
    assert complete_group_if_done(db, redis_client, group_id) is None
    group = _group(db, group_id)
    assert group.status == "complete" and group.stream_entry_id == orphan_entry
    assert len(redis_client.xrange(groups_stream(run_id))) == 1


def test_incomplete_group_is_not_appended(finished_group, db, redis_client) -> None:  # type: ignore[no-untyped-def]
    run_id, group_id, _ = finished_group(TASK, ["", ""], statuses=["graded", "running"])
    assert complete_group_if_done(db, redis_client, group_id) is None
    assert redis_client.xrange(groups_stream(run_id)) == [] and _group(db, group_id).status == "running"


def test_harnessrl_worker_grader_command(client, settings_env, finished_group, db, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``harnessrl worker grader`` starts a real grading worker on the ``grading`` queue; on start it removes the
    scratch folders a dead predecessor left behind."""
    run_id, group_id, ids = finished_group(TASK, [SOLUTION])
    predecessor = subprocess.Popen(["true"])
    predecessor.wait()
    left_behind = Path(tempfile.gettempdir()) / f"harnessrl-grade-{predecessor.pid}-test" / "repo"
    left_behind.mkdir(parents=True)
    log = tmp_path / "grader.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli.main", "worker", "grader", "--concurrency", "1"],
            env={**settings_env, **FAST_RECOVERY},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait(lambda: "ready." in log.read_text(errors="replace"), 60, "the grader worker to start")
        _wait(lambda: not left_behind.parent.exists(), 10, "the dead predecessor's scratch folder to go")
        outcome = client.send_task(GRADE_ROLLOUT, args=[ids[0]], queue=GRADING_QUEUE).get(timeout=120)
        assert outcome["action"] == "graded" and outcome["reward"] == 1.0 and outcome["group_entry_id"]
        assert _group(db, group_id).status == "complete"
    finally:
        stop_process(proc)
    assert "harnessrl.grade_rollout" in log.read_text(errors="replace")


def test_ungradable_rollouts_are_infrastructure_errors_never_rewards(
    finished_group, db, store, sandbox, redis_client
) -> None:  # type: ignore[no-untyped-def]
    """A repository that cannot be materialized, or an unknown reward function, is not the model's doing: the
    grading is retried while attempts last, then the rollout ends ``failed`` with outcome ``infrastructure_error``
    and the reason, with no reward row (never a 0 the learner would train on); its group still completes."""
    gone = TASK.with_source(DirSource(kind="dir", path="/nonexistent/harnessrl/repo"))
    run_id, group_id, (no_repo,) = finished_group(gone, [SOLUTION])
    _, _, (bad_fn,) = finished_group(TASK, [SOLUTION], reward_fn="no_such_reward")

    def grade(rollout_id: str):  # type: ignore[no-untyped-def]
        return grade_rollout(
            rollout_id,
            db=db,
            store=store,
            sandbox=sandbox,
            redis_client=redis_client,
            timeout_s=60,
            max_attempts=2,
        )

    with pytest.raises(GradingRetry, match="does not exist"):
        grade(no_repo)  # attempt 1 of 2: the task retries later
    assert _group(db, group_id).status != "complete"
    for rollout_id in (no_repo, bad_fn):
        outcome = grade(rollout_id)
        assert outcome.action == "gave_up" and outcome.reward is None
    assert _rewards(db, [no_repo, bad_fn]) == {no_repo: [], bad_fn: []}
    with session_scope(db) as session:
        rows = {r.id: r for r in session.scalars(select(Rollout).where(Rollout.id.in_([no_repo, bad_fn])))}
    assert (rows[no_repo].status, rows[no_repo].outcome, rows[no_repo].outcome_reason) == (
        "failed", "infrastructure_error", "repo_unavailable"
    )  # fmt: skip
    assert (rows[bad_fn].outcome, rows[bad_fn].outcome_reason) == (
        "infrastructure_error",
        "unknown_reward_fn",
    )
    assert "does not exist" in (rows[no_repo].error or "")
    assert (
        "unknown reward function 'no_such_reward'"
        in store.get_bytes(rows[bad_fn].meta["grading_logs_key"]).decode()
    )
    assert _group(db, group_id).status == "complete" and len(redis_client.xrange(groups_stream(run_id))) == 1
