"""Each real harness CLI, sandboxed, against a real gateway when something is wrong: the model upstream is down
or the harness presents a wrong rollout key. The CLI must give up quickly (the adapters' retry knobs work) and
leave the rollout with nothing recorded. A dead upstream is the infrastructure's fault: the gateway records an
incident, and the attempt is retried (within the budget) or ends ``infrastructure_error`` — never a harness error
to be graded. A wrong key is the harness's own failure (``harness_error``, even when it exits 0: Qwen).

Qwen Code is left out of the upstream-down case: it retries 5xx answers with backoff (about 70 s, hard-coded
in 0.15.10's ``retryWithBackoff``; 0.24.4 still took 79 s, measured under load), no setting turns it off, so it
gives up, but slowly. A 401 it does not retry, which the wrong-key case checks.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from services.runner.rollout import Attempt, claim, execute_attempt
from shared.db import session_scope
from shared.models import Rollout

pytestmark = [pytest.mark.e2e]


def run_failing(
    settings, db, store, sandbox, attempt: Attempt, rollout_id: str, outcome: str
) -> tuple[Rollout, str, float]:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    result = execute_attempt(settings, db, store, sandbox, attempt)
    elapsed = time.monotonic() - started
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        stdout = store.get_bytes(f"{rollout.logs_key}/harness.stdout").decode()
        stderr = store.get_bytes(f"{rollout.logs_key}/harness.stderr").decode()
        detail = f"{rollout.error}\nstdout: {stdout[-1500:]}\nstderr: {stderr[-1500:]}"
        assert result.status == "failed" and rollout.harness_outcome == "harness_error", detail
        assert rollout.outcome == outcome, detail
        assert rollout.isolation and rollout.isolation.startswith("bwrap"), detail
        assert rollout.meta["attempts"][-1]["calls"] == 0, detail
        return rollout, detail, elapsed


@pytest.mark.parametrize("harness", ["codex", "claude-code", "pi", "gemini", "mini-swe-agent", "reference"])
def test_harness_fails_fast_when_the_model_is_down(  # type: ignore[no-untyped-def]
    harness, dead_upstream_gateway, sandbox, db, store, toy_task, make_rollouts
):
    # No retry budget: the one attempt ends the rollout (with a budget it would go back to the queue).
    settings = dead_upstream_gateway.settings.model_copy(update={"rollout_retries": 0})
    _, _, [rollout_id] = make_rollouts(toy_task, harness)
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    rollout, detail, elapsed = run_failing(
        settings, db, store, sandbox, attempt, rollout_id, "infrastructure_error"
    )
    assert rollout.outcome_reason == "inference_unavailable", detail  # the gateway's incident
    assert "503" in (rollout.error or ""), detail  # the gateway's "upstream down", as the CLI reported it
    assert elapsed < 30, f"{harness} took {elapsed:.1f}s to give up: {detail}"


def test_an_infrastructure_failure_with_budget_left_goes_back_to_the_queue(  # type: ignore[no-untyped-def]
    dead_upstream_gateway, sandbox, db, store, toy_task, make_rollouts
):
    settings = dead_upstream_gateway.settings
    run_id, _, [rollout_id] = make_rollouts(toy_task, "reference")
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    result = execute_attempt(settings, db, store, sandbox, attempt)
    assert (result.action, result.status, result.send_to_grading) == ("retry", "queued", False)
    with session_scope(db) as session:
        rollout = session.get(Rollout, rollout_id)
        assert rollout is not None
        assert rollout.outcome is None and "inference_unavailable" in (rollout.error or "")
        assert rollout.meta["attempts"][-1]["classified"] == "infrastructure_error"
        assert rollout.retry_at is not None and rollout.enqueued_at is None  # the scheduler re-sends it
    again = claim(settings, db, store, rollout_id)
    assert isinstance(again, Attempt) and again.attempt == 2 and again.rollout_key != attempt.rollout_key


@pytest.mark.parametrize(
    "harness", ["codex", "claude-code", "qwen-code", "pi", "gemini", "mini-swe-agent", "reference"]
)
def test_wrong_rollout_key_is_a_visible_harness_error(  # type: ignore[no-untyped-def]
    harness, dead_upstream_gateway, sandbox, db, store, toy_task, make_rollouts
):
    settings = dead_upstream_gateway.settings
    _, _, [rollout_id] = make_rollouts(toy_task, harness)
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    # the harness presents a key nobody registered with the gateway
    mis_keyed = dataclasses.replace(attempt, rollout_key="rk_not_a_rollout_of_this_gateway", binding=None)
    rollout, detail, elapsed = run_failing(
        settings, db, store, sandbox, mis_keyed, rollout_id, "harness_error"
    )
    assert "401" in (rollout.error or "") or "key" in (rollout.error or "").lower(), detail
    assert elapsed < 30, f"{harness} took {elapsed:.1f}s to give up: {detail}"
