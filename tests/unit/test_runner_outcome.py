"""The runner's outcome classification (``services/runner/outcome.py``), one rule per case of the table in
``shared/statuses.py``."""

from __future__ import annotations

import pytest

from services.runner.outcome import NO_CALLS_ERROR, AttemptFacts, classify_attempt
from shared.context_fit import ContextOverflow
from shared.incidents import new_incident
from shared.statuses import KILLED_RUN_STOPPED, RUN_STOPPED_REASON, Outcome, limit_reason

GATEWAY_GONE = new_incident("gateway_restarted", "the gateway service (re)started during the attempt")
UPSTREAM_DOWN = new_incident("inference_unavailable", "HTTP 503: Cannot connect to host 127.0.0.1:8302")


def facts(**changes: object) -> AttemptFacts:
    base: dict[str, object] = {
        "harness_outcome": "completed",
        "harness_reason": None,
        "killed_reason": None,
        "calls": 3,
    }
    return AttemptFacts(**{**base, **changes})  # type: ignore[arg-type]


def test_a_normal_end_is_left_to_the_grader() -> None:
    verdict = classify_attempt(facts())
    assert (verdict.outcome, verdict.graded, verdict.error) == (None, True, None)


@pytest.mark.parametrize("incident", [GATEWAY_GONE, UPSTREAM_DOWN])
def test_a_harness_failing_under_an_incident_is_an_infrastructure_error(incident) -> None:  # type: ignore[no-untyped-def]
    verdict = classify_attempt(
        facts(
            harness_outcome="harness_error", harness_reason="Connection reset by peer", incidents=[incident]
        )
    )
    assert verdict.outcome == Outcome.INFRASTRUCTURE_ERROR and verdict.infrastructure
    assert verdict.reason == incident.cause and not verdict.graded
    assert incident.cause in (verdict.error or "") and "Connection reset by peer" in (verdict.error or "")


def test_a_timeout_under_an_incident_and_a_silent_zero_call_run_are_infrastructure_too() -> None:
    timed_out = classify_attempt(
        facts(harness_outcome="timeout", killed_reason="timeout", incidents=[UPSTREAM_DOWN])
    )
    assert timed_out.outcome == Outcome.INFRASTRUCTURE_ERROR
    # A harness that swallowed the 503s and exited 0 without a single answer.
    silent = classify_attempt(facts(calls=0, incidents=[UPSTREAM_DOWN]))
    assert silent.outcome == Outcome.INFRASTRUCTURE_ERROR


def test_a_harness_that_recovered_from_an_incident_keeps_its_result() -> None:
    verdict = classify_attempt(facts(incidents=[UPSTREAM_DOWN]))
    assert verdict.outcome is None and verdict.graded


def test_our_own_failure_is_an_infrastructure_error() -> None:
    verdict = classify_attempt(facts(runner_error="TaskRepoError: /repo does not exist", calls=0))
    assert (verdict.outcome, verdict.reason, verdict.graded) == (
        Outcome.INFRASTRUCTURE_ERROR,
        "runner_error",
        False,
    )


def test_a_trajectory_missing_a_record_is_never_graded_even_when_the_harness_completed() -> None:
    lost = "the gateway lost the records of 1 call(s) of this rollout (gateway process h:12:ab died before recording it)"
    verdict = classify_attempt(facts(capture_lost=lost))
    assert (verdict.outcome, verdict.reason, verdict.graded) == (
        Outcome.INFRASTRUCTURE_ERROR,
        "capture_lost",
        False,
    )
    assert verdict.error == lost


@pytest.mark.parametrize(
    ("killed", "limit"), [("timeout", "wall_clock"), ("memory", "memory"), ("disk", "disk")]
)
def test_sandbox_kills_are_limits_graded_when_the_model_took_part(killed: str, limit: str) -> None:
    verdict = classify_attempt(facts(harness_outcome="harness_error", killed_reason=killed))
    assert (verdict.outcome, verdict.reason, verdict.graded) == (Outcome.LIMIT, limit_reason(limit), True)
    assert (verdict.error or "").startswith(f"limit:{limit}")
    assert not classify_attempt(facts(harness_outcome="timeout", killed_reason=killed, calls=0)).graded


def test_model_caused_harness_errors_stay_graded() -> None:
    verdict = classify_attempt(facts(harness_outcome="harness_error", harness_reason="malformed reply"))
    assert (verdict.outcome, verdict.reason, verdict.graded) == (
        Outcome.HARNESS_ERROR,
        "harness_failed",
        True,
    )


def test_a_harness_error_or_a_normal_end_without_calls_is_not_graded() -> None:
    failed = classify_attempt(
        facts(harness_outcome="harness_error", harness_reason="HTTP 400: prompt too long", calls=0)
    )
    assert (failed.outcome, failed.reason, failed.graded) == (Outcome.HARNESS_ERROR, "no_calls", False)
    assert failed.error == "HTTP 400: prompt too long"
    silent = classify_attempt(facts(calls=0))
    assert (silent.outcome, silent.error, silent.graded) == (Outcome.HARNESS_ERROR, NO_CALLS_ERROR, False)


def test_a_prompt_that_did_not_fit_ends_with_reason_context_and_both_numbers() -> None:
    overflow = ContextOverflow(prompt_tokens=17594, context_length=4096)
    verdict = classify_attempt(
        facts(harness_outcome="harness_error", harness_reason="claude: Prompt is too long", calls=0,
              context_overflow=overflow)
    )  # fmt: skip
    assert (verdict.outcome, verdict.reason, verdict.graded) == (Outcome.HARNESS_ERROR, "context", False)
    assert "17594" in (verdict.error or "") and "4096" in (verdict.error or "")
    # Mid-rollout (the conversation outgrew the context after some calls): graded like any harness error.
    later = classify_attempt(facts(harness_outcome="harness_error", calls=5, context_overflow=overflow))
    assert (later.reason, later.graded) == ("context", True)
    # A harness that recovered (compacted its history) and ended normally keeps its result.
    assert classify_attempt(facts(calls=5, context_overflow=overflow)).outcome is None
    # Infrastructure evidence and limits come first.
    assert classify_attempt(
        facts(harness_outcome="harness_error", calls=0, context_overflow=overflow, incidents=[UPSTREAM_DOWN])
    ).infrastructure
    assert classify_attempt(
        facts(harness_outcome="timeout", calls=0, context_overflow=overflow)
    ).reason == limit_reason("wall_clock")


def test_a_harness_killed_because_its_run_was_stopped_is_cancelled_whatever_else_happened() -> None:
    """The kill is ours: neither a limit nor an infrastructure error to retry, and never graded, even with calls
    or an incident during the attempt."""
    for extra in ({}, {"incidents": [GATEWAY_GONE]}, {"calls": 0}, {"harness_outcome": "harness_error"}):
        verdict = classify_attempt(facts(killed_reason=KILLED_RUN_STOPPED, **extra))
        assert (verdict.outcome, verdict.reason, verdict.graded) == (
            Outcome.CANCELLED,
            RUN_STOPPED_REASON,
            False,
        )
        assert not verdict.infrastructure
