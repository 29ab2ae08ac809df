"""Chain tips in Redis and write-behind capture, through real gateways (in-thread apps, each with its own state as a
process has: its tip cache, id blocks, lease and writer), real Postgres, Redis and S3, the real runner and sandbox.

- a restarted gateway resumes the chain (no new root, no fork row);
- two gateways serving a chain's calls alternately record the same chain as one gateway;
- two gateways racing to extend one tip: one extension, one ``retry`` fork, never a tip extended twice;
- the flush barrier: the runner cannot finish a rollout while its last call's record is still being written;
- a record that does not land in time fails the attempt, which is run again and never graded on it.
(A gateway process killed with records unwritten: ``tests/e2e/test_gateway_workers.py``.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text

from shared import capture_state
from shared.db import session_scope
from shared.models import Call, Chain, Rollout
from shared.rollout_records import read_meta
from shared.trajectory import load_chain
from tests.fixtures.gateway import settle_gateways

pytestmark = pytest.mark.integration

BASH = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": BASH}}]


def converse(urls: list[str], key: str, calls: int) -> list[dict[str, Any]]:
    """A harness's conversation over OpenAI chat: call ``i`` goes to ``urls[i % len(urls)]``; tool calls are
    answered with 'ok'."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Create hello.txt"},
    ]
    replies = []
    for index in range(calls):
        response = httpx.post(
            urls[index % len(urls)] + "/v1/chat/completions",
            json={"model": "policy", "messages": messages, "tools": TOOLS},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        message = response.json()["choices"][0]["message"]
        replies.append(message)
        messages.append(message)
        for call in message.get("tool_calls") or []:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "ok"})
    return replies


def recorded(db, store, rollout_id: str) -> list[tuple[str | None, list[int], list[int]]]:  # type: ignore[no-untyped-def]
    """Per chain (in order of creation): fork reason, call positions, token ids."""
    settle_gateways()
    with session_scope(db) as session:
        chains = list(
            session.scalars(
                select(Chain).where(Chain.rollout_id == rollout_id).order_by(Chain.created_at, Chain.id)
            )
        )
        out = []
        for chain in chains:
            calls = list(
                session.scalars(select(Call).where(Call.chain_id == chain.id).order_by(Call.position))
            )
            ids = load_chain(store, calls, rollout_id=rollout_id).ids
            out.append((chain.fork_reason, [c.position for c in calls], ids.tolist()))
    return out


def test_restart_between_two_calls_leaves_one_unforked_chain(
    gateway_factory, scripted_policy, make_rollout, db, store
):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    gateway = gateway_factory()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Create hello.txt"},
    ]
    for turn in range(2):
        response = httpx.post(
            gateway.url + "/v1/chat/completions",
            json={"model": "policy", "messages": messages, "tools": TOOLS},
            headers={"Authorization": f"Bearer {ref.rollout_key}"},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        message = response.json()["choices"][0]["message"]
        messages.append(message)
        messages += [
            {"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in message["tool_calls"]
        ]
        if turn == 0:
            gateway_factory.stop(gateway)  # drains its records, drops its lease
            gateway = gateway_factory()
    chains = recorded(db, store, ref.rollout_id)
    assert [(reason, positions) for reason, positions, _ in chains] == [(None, [0, 1])]


def test_two_gateways_alternating_record_the_same_chain_as_one(
    gateway_factory, scripted_policy, make_rollout, db, store
):  # type: ignore[no-untyped-def]
    a, b = gateway_factory(), gateway_factory()
    alternating, single = make_rollout(), make_rollout()
    replies = [
        converse(urls, ref.rollout_key, 4) for urls, ref in (([a.url, b.url], alternating), ([a.url], single))
    ]
    assert [[c["function"] for c in m.get("tool_calls") or []] for m in replies[0]] == [
        [c["function"] for c in m.get("tool_calls") or []] for m in replies[1]
    ]
    chains = recorded(db, store, alternating.rollout_id)
    assert chains == recorded(db, store, single.rollout_id)
    assert [(reason, positions) for reason, positions, _ in chains] == [(None, [0, 1, 2, 3])]


@pytest.mark.parametrize(
    ("splice_mode", "measure_drift"),
    [("splice", False), ("retemplate", True)],
    ids=["no-drift-check", "retemplate"],
)
def test_a_gateway_that_checks_no_drift_extends_its_chains(
    gateway_factory, scripted_policy, make_rollout, db, store, splice_mode: str, measure_drift: bool
):  # type: ignore[no-untyped-def]
    # the new tip's message digests are made while the model reads the prompt, with the drift check where there
    # is one; where there is none, the commit must still find every digest the next call is matched against
    gateway = gateway_factory(splice_mode=splice_mode, measure_drift=measure_drift)
    ref = make_rollout()
    converse([gateway.url], ref.rollout_key, 4)
    chains = recorded(db, store, ref.rollout_id)
    assert [(reason, positions) for reason, positions, _ in chains] == [(None, [0, 1, 2, 3])]
    with session_scope(db) as session:
        drifts = session.scalars(select(Call.retemplate_drift).where(Call.rollout_id == ref.rollout_id)).all()
    assert drifts == [None] * 4


def test_racing_extensions_in_two_gateways_extend_the_tip_once(
    gateway_factory, scripted_policy, make_rollout, db, store
):  # type: ignore[no-untyped-def]
    a, b = gateway_factory(), gateway_factory()
    ref = make_rollout()
    [first] = converse([a.url], ref.rollout_key, 1)
    messages = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Create hello.txt"},
        first,
        *({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in first["tool_calls"]),
    ]
    scripted_policy.policy.token_delay_s = 0.02  # both calls plan on the same tip, then sample for a while
    statuses: list[int] = []

    def second_call(url: str) -> None:
        response = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "policy", "messages": messages, "tools": TOOLS, "stream": True},
            headers={"Authorization": f"Bearer {ref.rollout_key}"},
            timeout=60,
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=second_call, args=(url,)) for url in (a.url, b.url)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [200, 200]
    chains = recorded(db, store, ref.rollout_id)
    assert [(reason, positions) for reason, positions, _ in chains] == [(None, [0, 1]), ("retry", [0])]
    # the loser keeps the prompt it was given (the winner's prompt: same tip, same suffix) as its first segment
    with session_scope(db) as session:
        winner, loser = (
            session.scalar(select(Call.prompt_tokens).where(Call.rollout_id == ref.rollout_id, Call.position == 1)),
            session.scalar(select(Call.prompt_tokens).where(Call.fork_reason == "retry", Call.rollout_id == ref.rollout_id)),
        )  # fmt: skip
    assert winner == loser and chains[0][2][:winner] == chains[1][2][:loser]


# --- the flush barrier, through the runner -----------------------------------------------------------------

# A shell "harness" that makes one model call through the gateway (the sandbox's forwarder) and exits.
ONE_CALL = (
    '/usr/bin/python3 -c "import json, os, urllib.request; '
    "body = json.dumps({'model': 'policy', 'messages': [{'role': 'user', 'content': 'hi'}]}).encode(); "
    "request = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', data=body, "
    "headers={'Content-Type': 'application/json', 'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY']}); "
    'print(urllib.request.urlopen(request, timeout=60).status)" {instruction}'
)


class ChainsLocked:
    """Holds a lock on ``chains`` that blocks inserts (the gateway's write of a new chain) and nothing the runner
    does: a deliberately slow record write, with real Postgres."""

    def __init__(self, engine) -> None:  # type: ignore[no-untyped-def]
        self.connection = engine.connect()
        self.transaction = self.connection.begin()
        self.connection.execute(text("LOCK TABLE chains IN SHARE ROW EXCLUSIVE MODE"))

    def release(self) -> None:
        self.transaction.rollback()
        self.connection.close()


def pending_calls(redis_client, db, rollout_id: str) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        key = session.get(Rollout, rollout_id).rollout_key  # type: ignore[union-attr]
    return redis_client.hgetall(capture_state.pending_key(key))  # type: ignore[no-any-return]


def run_in_thread(target, *args):  # type: ignore[no-untyped-def]
    result: dict[str, Any] = {}

    def run() -> None:
        result["outcome"] = target(*args)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def wait_until(condition, timeout_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_a_rollout_is_not_finished_before_its_last_record_lands(  # type: ignore[no-untyped-def]
    gateway_server, scripted_policy, db_engine, db, store, sandbox, redis_client, toy_task, make_rollouts
):
    from services.runner.rollout import run_rollout

    settings = gateway_server.settings
    _, _, [rollout_id] = make_rollouts(toy_task, {"name": "shell", "command": ONE_CALL})
    lock = ChainsLocked(db_engine)
    try:
        thread, result = run_in_thread(run_rollout, settings, db, store, sandbox, rollout_id)
        # the harness got its reply and exited; the call is pending because its record cannot be written yet
        wait_until(lambda: pending_calls(redis_client, db, rollout_id))
        time.sleep(2.0)
        with session_scope(db) as session:
            assert session.get(Rollout, rollout_id).status == "running"  # type: ignore[union-attr]
        assert thread.is_alive()  # waiting at the flush barrier
    finally:
        lock.release()
    thread.join(60)
    outcome = result["outcome"]
    assert outcome.action == "ran" and outcome.status == "finished", outcome
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        calls = list(session.scalars(select(Call).where(Call.rollout_id == rollout_id)))
    assert rollout is not None and rollout.attempt == 1 and len(calls) == 1
    assert rollout.finished_at is not None and rollout.finished_at >= calls[0].created_at


def test_a_record_that_never_lands_in_time_fails_the_attempt_for_a_retry(  # type: ignore[no-untyped-def]
    gateway_server, scripted_policy, db_engine, db, store, sandbox, redis_client, toy_task, make_rollouts
):
    from services.runner.rollout import run_rollout

    settings = gateway_server.settings.model_copy(update={"capture_flush_timeout_s": 4.0})
    _, _, [rollout_id] = make_rollouts(toy_task, {"name": "shell", "command": ONE_CALL})
    lock = ChainsLocked(db_engine)
    try:
        thread, result = run_in_thread(run_rollout, settings, db, store, sandbox, rollout_id)
        # the harness has exited and the barrier closed the key; after its 4 s it gives up on the record
        wait_until(lambda: _closed(redis_client, db, rollout_id))
        time.sleep(5.0)
    finally:
        lock.release()  # the late record may now land: the retry removes it with its attempt, or it is fenced off
    thread.join(120)
    first = result["outcome"]
    assert first.action == "retry" and first.status == "queued" and not first.send_to_grading, first
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None and rollout.retry_at is not None  # the scheduler sends it again
        [report] = read_meta(rollout).attempts
    assert report.classified == "infrastructure_error" and "not recorded within" in (
        report.capture_lost or ""
    )

    second = run_rollout(settings, db, store, sandbox, rollout_id)  # what the re-sent task does
    assert second.action == "ran" and second.status == "finished", second
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        calls = list(session.scalars(select(Call).where(Call.rollout_id == rollout_id)))
        chains = list(session.scalars(select(Chain).where(Chain.rollout_id == rollout_id)))
    assert rollout is not None and rollout.attempt == 2
    # only attempt 2's call: attempt 1's late record was removed with its attempt, or fenced off by its stale key
    assert len(calls) == 1 and len(chains) == 1 and calls[0].created_at >= rollout.started_at


def _closed(redis_client, db, rollout_id: str) -> bool:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        key = session.get(Rollout, rollout_id).rollout_key  # type: ignore[union-attr]
    return bool(redis_client.hexists(capture_state.state_key(key), capture_state.FIELD_CLOSED))


def test_calls_after_the_barrier_are_refused(gateway_server, scripted_policy, make_rollout, redis_client):  # type: ignore[no-untyped-def]
    ref = make_rollout()
    converse([gateway_server.url], ref.rollout_key, 1)
    assert capture_state.flush(redis_client, ref.rollout_key, timeout_s=30).complete
    response = httpx.post(
        gateway_server.url + "/v1/chat/completions",
        json={"model": "policy", "messages": [{"role": "user", "content": "again"}]},
        headers={"Authorization": f"Bearer {ref.rollout_key}"},
        timeout=30,
    )
    assert response.status_code == 401 and "over" in response.text
