"""A run's per-rollout limits (``shared/run_config.py: LimitsConfig``) end a rollout that reaches one, and its row
says which: ``outcome = 'limit'`` and ``outcome_reason = 'limit:<name>'``.

Each test stores a run whose config carries one limit (the way the api stores it), and runs one rollout of the
``shell`` harness through the real runner path (claim, sandbox, gateway, classification) with a command that
goes past that limit: sleeping past a 5 s wall clock, touching 512 MiB under a 64 MiB memory limit, starting 40
processes under a limit of 16, and calling the model in a loop past a call or token limit.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.runner.rollout import Attempt, claim, execute_attempt
from shared.db import session_scope
from shared.models import Rollout

pytestmark = [pytest.mark.e2e]

CHAT = '{"model": "policy", "messages": [{"role": "user", "content": "hi"}]}'
CURL = (
    'curl -sf -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" '
    f"-d '{CHAT}' \"$OPENAI_BASE_URL/chat/completions\" > /dev/null"
)


def run_with_limit(
    command: str, limits: dict[str, Any], scripted_gateway, sandbox, db, store, toy_task, make_rollouts
):  # type: ignore[no-untyped-def]
    """One rollout of ``command`` in a run with ``limits``; returns its row after the attempt."""
    settings = scripted_gateway.settings
    harness = {"name": "shell", "command": f"{command} # {{instruction}}"}
    _, _, [rollout_id] = make_rollouts(toy_task, harness, limits=limits)
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt) and attempt.limits.model_dump(exclude_none=True) == limits
    execute_attempt(settings, db, store, sandbox, attempt)
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        session.expunge(rollout)
    return rollout


def test_wall_clock_limit_ends_a_sleeping_harness(
    scripted_gateway, sandbox, db, store, toy_task, make_rollouts
):  # type: ignore[no-untyped-def]
    rollout = run_with_limit("sleep 60", {"wall_clock_s": 5.0}, scripted_gateway, sandbox, db, store, toy_task,
                             make_rollouts)  # fmt: skip
    assert (rollout.outcome, rollout.outcome_reason) == ("limit", "limit:wall_clock"), rollout.error
    assert rollout.error.startswith("limit:wall_clock")
    assert 5.0 <= rollout.meta["attempts"][-1]["harness_s"] < 30.0


def test_memory_limit_ends_a_harness_that_touches_more(
    scripted_gateway, sandbox, db, store, toy_task, make_rollouts
):  # type: ignore[no-untyped-def]
    if not sandbox.cgroups:
        pytest.fail(f"per-sandbox cgroups are not usable on this machine (isolation: {sandbox.isolation})")
    touch = "python3 -c \"b = b'x' * (512 << 20); print(len(b))\""
    rollout = run_with_limit(touch, {"memory_bytes": 64 << 20}, scripted_gateway, sandbox, db, store, toy_task,
                             make_rollouts)  # fmt: skip
    assert (rollout.outcome, rollout.outcome_reason) == ("limit", "limit:memory"), rollout.error
    assert str(64 << 20) in rollout.error


def test_process_limit_ends_a_harness_that_forks_past_it(
    scripted_gateway, sandbox, db, store, toy_task, make_rollouts
):  # type: ignore[no-untyped-def]
    if not sandbox.cgroups:
        pytest.fail(f"per-sandbox cgroups are not usable on this machine (isolation: {sandbox.isolation})")
    fork = "for i in $(seq 40); do sleep 30 & done; wait"
    rollout = run_with_limit(fork, {"processes": 16}, scripted_gateway, sandbox, db, store, toy_task,
                             make_rollouts)  # fmt: skip
    assert (rollout.outcome, rollout.outcome_reason) == ("limit", "limit:processes"), rollout.error
    assert "16 processes" in rollout.error
    assert rollout.meta["attempts"][-1]["harness_s"] < 25.0  # ended at the refused fork, not by the sleeps


@pytest.mark.parametrize(("limit", "value"), [("calls", 2), ("tokens", 3)])
def test_call_and_token_limits_end_a_harness_that_keeps_calling(  # type: ignore[no-untyped-def]
    limit, value, scripted_gateway, scripted_policy, sandbox, db, store, toy_task, make_rollouts
):
    scripted_policy.set_scripts([[{"say": "hello from the policy"}]])
    loop = f"for i in $(seq 20); do {CURL}; sleep 1; done"
    rollout = run_with_limit(
        loop, {limit: value}, scripted_gateway, sandbox, db, store, toy_task, make_rollouts
    )
    assert (rollout.outcome, rollout.outcome_reason) == ("limit", f"limit:{limit}"), rollout.error
    assert f"limit of {value} {limit}" in rollout.error
    calls = rollout.meta["attempts"][-1]["calls"]
    assert 1 <= calls <= 4  # ended within about a second of reaching the limit, far from the loop's 20
    assert rollout.status == "finished"  # it made model calls: graded like any other rollout
