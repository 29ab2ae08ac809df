"""How one attempt of a rollout ended: the runner's half of the outcome classification (``shared/statuses.py``
has the table and the definitions). A pure function of what the attempt observed, so each rule is unit-tested.

The runner decides ``harness_error``, ``limit`` and ``infrastructure_error``; a harness that ended normally with
calls leaves the outcome open and the grader sets ``resolved`` or ``unresolved``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.context_fit import CONTEXT_REASON, ContextOverflow
from shared.incidents import Incident
from shared.statuses import (
    KILLED_RUN_STOPPED,
    PATCH_REFUSED_REASON,
    RUN_STOPPED_REASON,
    Outcome,
    limit_reason,
)

NO_CALLS_ERROR = (
    "the harness made no model calls through the gateway (it bypassed the gateway, used a wrong key, "
    "or failed before its first request)"
)
# The sandbox's kill reasons and the limit each one is (``calls`` and ``tokens`` are the runner's own stop checks
# of a run's LimitsConfig; rollout.py).
SANDBOX_LIMITS = {
    "timeout": "wall_clock",
    "memory": "memory",
    "disk": "disk",
    "processes": "processes",
    "calls": "calls",
    "tokens": "tokens",
}


@dataclass(frozen=True)
class AttemptFacts:
    """What one attempt observed. ``harness_outcome`` is the adapter's verdict (completed | harness_error |
    timeout); ``runner_error`` an exception in our own code (materializing, the sandbox, the object store);
    ``incidents`` the infrastructure evidence gathered for the attempt (``services/runner/infrastructure.py``);
    ``context_overflow`` the prompt the gateway refused because it did not fit the model (``shared/context_fit.py``)."""

    harness_outcome: str
    harness_reason: str | None
    killed_reason: str | None
    calls: int
    runner_error: str | None = None
    incidents: list[Incident] = field(default_factory=list)
    context_overflow: ContextOverflow | None = None
    capture_lost: str | None = None
    """The gateway's flush barrier found calls replied to whose records will never land (``shared/capture_state``)."""
    patch_refused: str | None = None
    """Why the workspace the agent left could not be diffed safely (``services/runner/patch.py: PatchRefused``): its
    patch is empty, and the rollout is the agent's failure, never retried."""


@dataclass(frozen=True)
class Classified:
    """``outcome`` None: the harness ended normally, the grader decides. ``graded``: the rollout goes to grading
    (it has calls the model sampled); otherwise it ends ``failed`` (or is retried, for infrastructure)."""

    outcome: Outcome | None
    reason: str | None
    error: str | None
    graded: bool

    @property
    def infrastructure(self) -> bool:
        return self.outcome == Outcome.INFRASTRUCTURE_ERROR


def classify_attempt(facts: AttemptFacts) -> Classified:
    if facts.killed_reason == KILLED_RUN_STOPPED:
        # Killed on purpose: whatever it had done is neither the model's result nor a failure to retry.
        error = "the run was stopped while this rollout ran; the runner killed the harness"
        return Classified(Outcome.CANCELLED, RUN_STOPPED_REASON, error, graded=False)
    if facts.runner_error is not None:
        return Classified(Outcome.INFRASTRUCTURE_ERROR, "runner_error", facts.runner_error, graded=False)
    if facts.capture_lost is not None:
        # The trajectory misses calls the harness saw: whatever the harness did, it is never graded.
        return Classified(Outcome.INFRASTRUCTURE_ERROR, "capture_lost", facts.capture_lost, graded=False)
    ended_normally = facts.harness_outcome == "completed" and facts.killed_reason is None
    if facts.incidents and (not ended_normally or facts.calls == 0):
        # The harness failed while the gateway or inference failed under it: not the model's doing. (A harness
        # that retried past an incident and ended normally keeps its result.)
        first = facts.incidents[0]
        detail = "; ".join(
            dict.fromkeys(f"{i.cause}: {i.detail}" if i.detail else i.cause for i in facts.incidents)
        )
        error = f"infrastructure failed during the attempt ({detail})"
        if facts.harness_reason:
            error += f"; the harness reported: {facts.harness_reason}"
        return Classified(Outcome.INFRASTRUCTURE_ERROR, first.cause, error, graded=False)
    limit = SANDBOX_LIMITS.get(facts.killed_reason or "")
    if limit is None and facts.harness_outcome == "timeout":
        limit = "wall_clock"
    refused = f"patch refused: {facts.patch_refused}" if facts.patch_refused is not None else None
    if limit is not None:
        reason = limit_reason(limit)
        error = f"{reason}: {facts.harness_reason or 'the sandbox killed the harness'}"
        if refused is not None:
            error += f"; {refused}"
        return Classified(Outcome.LIMIT, reason, error, graded=facts.calls > 0)
    if refused is not None:
        # What the agent left (a fifo, a nested repository, gigabytes of new files) is its own doing: an empty
        # patch graded like any other with calls (reward 0), never an infrastructure error to retry.
        error = (
            refused
            if facts.harness_reason is None
            else f"{refused}; the harness reported: {facts.harness_reason}"
        )
        return Classified(Outcome.HARNESS_ERROR, PATCH_REFUSED_REASON, error, graded=facts.calls > 0)
    if facts.context_overflow is not None and (not ended_normally or facts.calls == 0):
        # The harness gave up because its prompt did not fit: reason ``context``, with both numbers.
        error = facts.context_overflow.describe()
        if facts.harness_reason:
            error += f"; the harness reported: {facts.harness_reason}"
        return Classified(Outcome.HARNESS_ERROR, CONTEXT_REASON, error, graded=facts.calls > 0)
    if facts.harness_outcome != "completed":
        error = facts.harness_reason or "the harness failed"
        if facts.calls == 0:
            return Classified(Outcome.HARNESS_ERROR, "no_calls", error, graded=False)
        return Classified(Outcome.HARNESS_ERROR, "harness_failed", error, graded=True)
    if facts.calls == 0:
        return Classified(Outcome.HARNESS_ERROR, "no_calls", NO_CALLS_ERROR, graded=False)
    return Classified(None, None, None, graded=True)
