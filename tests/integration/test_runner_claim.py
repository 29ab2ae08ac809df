"""Rollout claims under redelivery (real Postgres and S3): a redelivered task never duplicates calls, a new
attempt gets a new rollout key, the retry budget ends in ``failed``, and a superseded attempt writes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from services.runner.rollout import Attempt, RolloutOutcome, _finish, claim
from shared.db import session_scope
from shared.models import Call, Chain, Rollout
from shared.rollout_records import AttemptReport, read_meta
from shared.trajectory import (
    Segment,
    chain_tokens_prefix,
    put_segment,
    raw_key,
    rollout_raw_prefix,
    rollout_tokens_prefix,
    tokens_key,
)

pytestmark = pytest.mark.integration


def _report(attempt: int) -> AttemptReport:
    return AttemptReport(
        attempt=attempt, outcome="completed", reason=None, exit_code=0, isolation="test", materialize_s=0.0,
        harness_s=0.0, patch_bytes=0, calls=0,
    )  # fmt: skip


def record_call(db, store, run_id: str, rollout_id: str) -> None:  # type: ignore[no-untyped-def]
    """What the gateway writes for one captured call: a chain, a call, its token segment and raw bodies."""
    key = tokens_key(run_id, rollout_id, 1, 0)
    put_segment(store, key, Segment.of(range(10), range(5), [-1.0] * 5, 0))
    store.put_bytes(raw_key(run_id, rollout_id, 1), b"{}")
    with session_scope(db) as session:
        chain = Chain(rollout_id=rollout_id, tokens_prefix=chain_tokens_prefix(run_id, rollout_id, 1))
        session.add(chain)
        session.flush()
        session.add(
            Call(
                rollout_id=rollout_id, chain_id=chain.id, position=0, provider_api="openai_chat",
                prompt_tokens=10, suffix_tokens=10, completion_tokens=5, finish_reason="stop", policy_version=0,
                tokens_key=key,
            )
        )  # fmt: skip


def count(db, model, rollout_id: str) -> int:  # type: ignore[no-untyped-def]
    with session_scope(db) as session:
        return int(
            session.scalar(select(func.count()).select_from(model).where(model.rollout_id == rollout_id))
        )


def test_redelivery_after_a_crash_starts_clean_with_a_new_key(settings, db, store, toy_task, make_rollouts):  # type: ignore[no-untyped-def]
    run_id, _, [rollout_id] = make_rollouts(toy_task, "reference")
    first = claim(settings, db, store, rollout_id)
    assert isinstance(first, Attempt) and first.attempt == 1 and first.task == toy_task
    record_call(db, store, run_id, rollout_id)

    # The worker died mid-run; Celery redelivers: the dead attempt's calls, chains and tokens are gone.
    second = claim(settings, db, store, rollout_id)
    assert isinstance(second, Attempt) and second.attempt == 2
    assert second.rollout_key != first.rollout_key
    assert count(db, Call, rollout_id) == 0 and count(db, Chain, rollout_id) == 0
    assert list(store.list(rollout_tokens_prefix(run_id, rollout_id))) == []
    assert list(store.list(rollout_raw_prefix(run_id, rollout_id))) == []

    # The first attempt's late result is fenced off.
    report = _report(1)
    stale = _finish(db, first, report, patch_key=None, logs_key="logs/x")
    assert stale.action == "stale" and not stale.send_to_grading
    with session_scope(db) as session:
        assert session.get(Rollout, rollout_id).status == "running"  # type: ignore[union-attr]


def test_retry_budget_ends_in_failed_and_terminal_rollouts_stay_put(
    settings, db, store, toy_task, make_rollouts
):  # type: ignore[no-untyped-def]
    run_id, _, [rollout_id] = make_rollouts(toy_task, "reference")
    for expected_attempt in range(1, settings.rollout_retries + 2):
        attempt = claim(settings, db, store, rollout_id)
        assert isinstance(attempt, Attempt) and attempt.attempt == expected_attempt
        record_call(db, store, run_id, rollout_id)
    gave_up = claim(settings, db, store, rollout_id)
    assert isinstance(gave_up, RolloutOutcome) and gave_up.action == "gave_up" and gave_up.status == "failed"
    assert "died during each of" in (gave_up.error or "")
    assert count(db, Call, rollout_id) == 0
    again = claim(settings, db, store, rollout_id)
    assert isinstance(again, RolloutOutcome) and again.action == "already_done" and again.send_to_grading


def test_finish_without_calls_is_an_error(settings, db, store, toy_task, make_rollouts):  # type: ignore[no-untyped-def]
    _, _, [rollout_id] = make_rollouts(toy_task, "reference")
    attempt = claim(settings, db, store, rollout_id)
    assert isinstance(attempt, Attempt)
    report = _report(1)
    outcome = _finish(db, attempt, report, patch_key="patches/x.diff", logs_key="logs/x")
    assert outcome.status == "failed" and "no model calls" in (outcome.error or "")
    with session_scope(db) as session:
        row = session.get(Rollout, rollout_id)
        assert row is not None
        [stored] = read_meta(row).attempts  # the attempt's report, through the record layer
        assert (stored.attempt, stored.outcome, stored.calls) == (1, "completed", 0)
        assert stored.classified == row.outcome is not None
