"""GRPO groups end to end through real processes: Celery runner and grader workers, a gateway process, the
scripted policy, Postgres, Redis and S3. For each harness a group of 4 rollouts of a bundled task runs with two
scripts dealt in rotation, one that solves the task through the harness's own tools and one that gives up:
rewards 1.0 and 0.0 where expected, exactly one ``groups`` stream entry, and rows consistent through the
``trajectories`` view. Then a runner process is SIGKILLed mid-rollout: the rollout is retried, the group still
completes once, and nothing is duplicated."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from shared.db import session_scope
from shared.events import groups_stream
from shared.models import Call, Group, Reward, Rollout
from shared.queues import ROLLOUTS_QUEUE, RUN_ROLLOUT, make_celery

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GROUP_SIZE = 4


@pytest.fixture
def rollout_workers(celery_workers, scripted_gateway):  # type: ignore[no-untyped-def]
    """One runner and one grader worker process bound to the scripted gateway's socket."""
    env = {"HARNESSRL_GATEWAY_SOCKET": str(scripted_gateway.socket)}
    runner = celery_workers("services.runner.tasks", [ROLLOUTS_QUEUE], env)
    grader = celery_workers("services.grader.tasks", ["grading"], env)
    return runner, grader


def enqueue(settings, rollout_ids: list[str]) -> None:  # type: ignore[no-untyped-def]
    app = make_celery(settings, "harnessrl-tests-enqueue")
    for rollout_id in rollout_ids:
        app.send_task(RUN_ROLLOUT, args=[rollout_id], queue=ROLLOUTS_QUEUE)


def wait_for_group(db, group_id: str, timeout_s: float, workers) -> Group:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with session_scope(db) as session:
            group = session.get(Group, group_id)
            if group is not None and group.status == "complete":
                return group
        time.sleep(0.5)
    logs = "\n=====\n".join(w.log.read_text(errors="replace")[-6000:] for w in workers)
    raise AssertionError(f"group {group_id} not complete after {timeout_s}s\n{logs}")


@pytest.mark.parametrize("harness", ["codex", "claude-code", "qwen-code", "pi", "gemini", "reference"])
def test_group_of_four_gets_the_expected_rewards(  # type: ignore[no-untyped-def]
    harness, rollout_workers, scripted_policy, solvable_task, settings, db, store, redis_client, make_rollouts
):
    scripted_policy.set_scripts([solvable_task.solve_script, solvable_task.fail_script])
    run_id, group_id, rollout_ids = make_rollouts(solvable_task.task, harness, GROUP_SIZE)
    enqueue(settings, rollout_ids)
    group = wait_for_group(db, group_id, 240, rollout_workers)

    with session_scope(db) as session:
        rows = session.execute(
            text(
                "SELECT rollout_id, status, reward, resolved, n_calls, n_chains, harness, isolation "
                "FROM trajectories WHERE group_id = :g ORDER BY index_in_group"
            ),
            {"g": group_id},
        ).all()
        solved = {
            r.id: solvable_task.solved_path.encode() in store.get_bytes(r.patch_key)
            for r in session.scalars(select(Rollout).where(Rollout.group_id == group_id))
        }
        reward_rows = session.scalar(
            select(func.count()).select_from(Reward).where(Reward.rollout_id.in_(rollout_ids))
        )
    errors = [(r.rollout_id, r.status) for r in rows if r.status != "graded"]
    assert not errors, errors
    assert sorted(r.reward for r in rows) == [0.0, 0.0, 1.0, 1.0], rows
    for row in rows:
        # The reward follows what the agent did: 1.0 exactly for the rollouts whose patch carries the fix.
        assert (row.reward == 1.0) == solved[row.rollout_id] == row.resolved, row
        assert row.n_calls >= 2 and row.n_chains >= 1 and row.harness == harness, row
        assert row.isolation.startswith("bwrap"), row
    assert reward_rows == GROUP_SIZE
    assert redis_client.xlen(groups_stream(run_id)) == 1
    assert group.stream_entry_id is not None


def running_rollout_with_calls(db, group_id: str) -> str | None:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        return session.scalar(
            select(Rollout.id)
            .join(Call, Call.rollout_id == Rollout.id)
            .where(Rollout.group_id == group_id, Rollout.status == "running")
            .limit(1)
        )


# Short task time limits let the broker give a dead worker's message back within seconds (the visibility
# timeout must exceed the longest task; docs/design.md#at-least-once-delivery).
FAST_REDELIVERY_ENV = {
    "HARNESSRL_ROLLOUT_TIMEOUT_S": "20",
    "HARNESSRL_GRADING_TIMEOUT_S": "20",
    "HARNESSRL_TASK_VISIBILITY_TIMEOUT_S": "25",
}


@pytest.mark.parametrize("killed", ["pool process", "whole worker"])
def test_sigkilled_runner_mid_rollout_is_retried_without_duplicates(  # type: ignore[no-untyped-def]
    killed, celery_workers, scripted_gateway, scripted_policy, solvable_task, settings, db, store, redis_client,
    make_rollouts,
):  # fmt: skip
    env = {"HARNESSRL_GATEWAY_SOCKET": str(scripted_gateway.socket), **FAST_REDELIVERY_ENV}
    runner = celery_workers("services.runner.tasks", [ROLLOUTS_QUEUE], env)
    grader = celery_workers("services.grader.tasks", ["grading"], env)
    workers = [runner, grader]
    scripted_policy.set_scripts([solvable_task.solve_script])
    scripted_policy.policy.token_delay_s = 0.03  # a rollout takes seconds: time to kill it mid-way
    run_id, group_id, rollout_ids = make_rollouts(solvable_task.task, "reference", GROUP_SIZE)
    enqueue(settings, rollout_ids)

    deadline = time.monotonic() + 120
    while (victim := running_rollout_with_calls(db, group_id)) is None:
        assert time.monotonic() < deadline, runner.log.read_text()[-3000:]
        time.sleep(0.05)
    if killed == "pool process":
        # The process running the rollout dies as the OOM killer would kill it: SIGKILL, no cleanup. Its sandbox
        # dies with it (bwrap --die-with-parent); the worker's main process requeues the unacknowledged message.
        children = Path(f"/proc/{runner.proc.pid}/task/{runner.proc.pid}/children").read_text().split()
        [pool_pid] = [int(pid) for pid in children]
        os.kill(pool_pid, signal.SIGKILL)
    else:
        # The whole worker (main and pool processes) dies; a new worker gets the message back from the broker
        # once the visibility timeout has passed.
        runner.kill()
        workers.append(celery_workers("services.runner.tasks", [ROLLOUTS_QUEUE], env))

    wait_for_group(db, group_id, 240, workers)
    with session_scope(db) as session:
        rollouts = {r.id: r for r in session.scalars(select(Rollout).where(Rollout.group_id == group_id))}
        calls = list(session.scalars(select(Call).where(Call.rollout_id == victim).order_by(Call.id)))
        rewards = list(session.scalars(select(Reward).where(Reward.rollout_id.in_(rollout_ids))))
        clean_calls = session.scalar(
            select(func.count())
            .select_from(Call)
            .where(Call.rollout_id == next(i for i in rollout_ids if i != victim))
        )
    victim_row = rollouts[victim]
    # Invariants whatever the second attempt did: it ran, the group completed exactly once, one reward (or a
    # final failure) per rollout, and none of the killed attempt's calls survive.
    assert victim_row.attempt == 2 and victim_row.status in ("graded", "failed"), victim_row.meta
    assert all(r.attempt == 1 and r.status == "graded" for i, r in rollouts.items() if i != victim)
    assert redis_client.xlen(groups_stream(run_id)) == 1
    graded = sorted(i for i, r in rollouts.items() if r.status == "graded")
    assert sorted(r.rollout_id for r in rewards) == graded and all(r.reward == 1.0 for r in rewards)
    assert all(c.created_at >= victim_row.started_at for c in calls)  # type: ignore[operator]
    # The retried attempt ran clean: one chain, positions 0..n-1, as many calls as an undisturbed rollout.
    assert victim_row.status == "graded", victim_row.meta
    assert len({c.chain_id for c in calls}) == 1 and [c.position for c in calls] == list(range(len(calls)))
    assert len(calls) == clean_calls
