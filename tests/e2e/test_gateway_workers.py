"""Several gateway processes and one of them killed (SIGKILL) in the middle of a group of real-CLI rollouts.

``harnessrl serve gateway --workers 2`` in front of the scripted policy; Celery runner and grader workers; a group
per harness (the reference agent and Claude Code, an npm CLI). While the group runs, the ``chains`` table is locked
(a deliberately slow record write), so calls are replied to and wait to be recorded; then the worker process that
owns some of those pending records is SIGKILLed and the lock released. The supervisor starts a new worker.

Whatever the timing, every rollout ends graded, either on its first attempt with one unforked chain, or — when the
killed process took an unwritten record with it (``capture_lost`` at the flush barrier), or the harness gave up on a
call the process died serving (Claude Code does on a reset stream) — after that attempt ended as an
infrastructure error and the scheduler ran it again. No graded rollout misses a call (every recorded prompt is exactly what the upstream received, and
each chain's calls are contiguous) and no call is recorded twice.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time

import pytest
from sqlalchemy import select, text

from shared import capture_state
from shared.db import session_scope
from shared.models import Call, Chain, Group, Rollout, Run
from shared.queues import ROLLOUTS_QUEUE, RUN_ROLLOUT, make_celery
from shared.trajectory import load_chain
from tests.e2e.conftest import start_gateway
from tests.fixtures.services import stop_process

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GROUP_SIZE = 3


@pytest.fixture
def two_worker_gateway(settings, settings_env, tiny_model_dir, data_dir, scripted_policy_server):  # type: ignore[no-untyped-def]
    # data_dir, not tmp_path: the sandboxed uid must reach the socket
    gateway = start_gateway(
        settings, settings_env, scripted_policy_server.url, tiny_model_dir, data_dir, workers=2
    )
    try:
        deadline = time.monotonic() + 60
        while len(gateway.worker_pids()) < 2:
            assert time.monotonic() < deadline, gateway.log_tail()
            time.sleep(0.1)
        # each worker froze its loaded heap (tokenizer, transformers, torch) out of the collector's sight
        serving = re.compile(r"gateway worker (\d+) serving \((\d+) objects frozen\)")
        while {int(pid) for pid, _ in serving.findall(gateway.log_tail(100_000))} < set(
            gateway.worker_pids()
        ):
            assert time.monotonic() < deadline, gateway.log_tail()
            time.sleep(0.1)
        assert all(int(frozen) > 100_000 for _, frozen in serving.findall(gateway.log_tail(100_000)))
        yield gateway
    finally:
        stop_process(gateway.proc, 60)


def pending_owners(redis_client, db, group_id: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Rollout id -> pid of a gateway process holding one of its calls replied to and unrecorded."""
    with session_scope(db) as session:
        keys = session.execute(
            select(Rollout.id, Rollout.rollout_key).where(
                Rollout.group_id == group_id, Rollout.status == "running"
            )
        ).all()
    owners = {}
    for rollout_id, key in keys:
        for call, owner in redis_client.hgetall(capture_state.pending_key(key)).items():
            if not call.startswith(capture_state.SERVING_PREFIX) and not owner.startswith(
                capture_state.FAILED_PREFIX
            ):
                owners[rollout_id] = int(owner.split(":")[1])
    return owners


def schedule(settings, run_id: str) -> int:  # type: ignore[no-untyped-def]
    """One tick of the api's scheduler outbox: send the run's queued rollouts that are due (a rollout put back
    after an infrastructure failure once its ``retry_at`` has passed)."""
    from services.api.scheduler import enqueue_pending
    from shared.db import async_session_factory, make_async_engine

    app = make_celery(settings, "harnessrl-tests-scheduler")

    def send(rollout_id: str) -> None:
        app.send_task(RUN_ROLLOUT, args=[rollout_id], queue=ROLLOUTS_QUEUE)

    async def tick() -> int:
        engine = make_async_engine(settings.database_url)
        try:
            return await enqueue_pending(async_session_factory(engine), send, run_id)
        finally:
            await engine.dispose()

    return asyncio.run(tick())


def wait_for_group(db, settings, run_id: str, group_id: str, timeout_s: float, logs) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with session_scope(db) as session:
            group = session.get(Group, group_id)
            if group is not None and group.status == "complete":
                return
        schedule(settings, run_id)
        time.sleep(1.0)
    raise AssertionError(f"group not complete after {timeout_s}s\n" + "\n=====\n".join(logs()))


@pytest.mark.parametrize("harness", ["reference", "claude-code"])
def test_killing_one_of_two_gateway_processes_loses_no_call(  # type: ignore[no-untyped-def]
    harness, two_worker_gateway, celery_workers, scripted_policy, solvable_task, settings, db, db_engine, store,
    redis_client, make_rollouts,
):  # fmt: skip
    gateway = two_worker_gateway
    env = {"HARNESSRL_GATEWAY_SOCKET": str(gateway.socket)}
    runner = celery_workers("services.runner.tasks", [ROLLOUTS_QUEUE], env, concurrency=GROUP_SIZE)
    grader = celery_workers("services.grader.tasks", ["grading"], env)
    scripted_policy.set_scripts([solvable_task.solve_script])
    scripted_policy.policy.token_delay_s = 0.01
    run_id, group_id, rollout_ids = make_rollouts(solvable_task.task, harness, GROUP_SIZE)
    with session_scope(db) as session:
        session.get(Run, run_id).status = "running"  # type: ignore[union-attr]  # the scheduler sends its rollouts

    def logs() -> list[str]:
        return [gateway.log_tail(6000), runner.log.read_text(errors="replace")[-6000:]]

    connection = db_engine.connect()
    lock = connection.begin()
    connection.execute(text("LOCK TABLE chains IN SHARE ROW EXCLUSIVE MODE"))  # records wait to be written
    try:
        assert schedule(settings, run_id) == GROUP_SIZE
        deadline = time.monotonic() + 180
        next_tick = time.monotonic() + 1.0
        while not (owners := pending_owners(redis_client, db, group_id)):
            assert time.monotonic() < deadline, logs()
            if time.monotonic() > next_tick:  # a rollout that waited for the gateway to answer is sent again
                schedule(settings, run_id)
                next_tick = time.monotonic() + 1.0
            time.sleep(0.05)
        victim_pid = next(iter(owners.values()))
        assert victim_pid in gateway.worker_pids()
        os.kill(victim_pid, signal.SIGKILL)
        hit = {rollout_id for rollout_id, pid in owners.items() if pid == victim_pid}
        time.sleep(1.0)
    finally:
        lock.rollback()
        connection.close()

    wait_for_group(db, settings, run_id, group_id, 420, logs)
    assert victim_pid not in gateway.worker_pids() and len(gateway.worker_pids()) == 2  # restarted
    received = [request["prompt_ids"] for request in scripted_policy.requests]
    with session_scope(db) as session:
        rollouts = list(session.scalars(select(Rollout).where(Rollout.group_id == group_id)))
        for rollout in rollouts:
            assert rollout.status == "graded", (rollout.id, rollout.status, rollout.error, rollout.meta)
            chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout.id)))
            calls = list(session.scalars(select(Call).where(Call.rollout_id == rollout.id)))
            # one unforked chain per conversation, calls 0..n-1, each call recorded once
            assert [c.fork_reason for c in chains] == [None], [(c.id, c.fork_reason) for c in chains]
            positions = sorted(c.position for c in calls)
            assert positions == list(range(len(calls))) and len(calls) >= 2, positions
            assert all(c.created_at >= rollout.started_at for c in calls)  # nothing of an earlier attempt
            # no missing call: every prompt the chain says the model saw is one the upstream received
            chain = load_chain(store, calls, rollout_id=rollout.id)
            for call in calls:
                prompt = chain.ids[: chain.prompt_length(call.position)].tolist()
                assert prompt in received, (
                    f"rollout {rollout.id} call {call.position}: not a prompt sent upstream"
                )
            attempts = rollout.meta["attempts"]
            assert attempts[-1]["outcome"] == "completed", attempts
            # every earlier attempt lost a record to the killed process, or its harness failed while a gateway
            # process died under it: an infrastructure error, run again
            assert all(a["classified"] == "infrastructure_error" for a in attempts[:-1]), attempts
            if rollout.id in hit:
                assert "died before recording" in attempts[0]["capture_lost"], attempts
            assert rollout.attempt == len(attempts) and (rollout.id not in hit or rollout.attempt >= 2)
    assert hit, "the killed process held no pending record"
    assert redis_client.xlen(f"harnessrl:groups:{run_id}") == 1
    del grader
