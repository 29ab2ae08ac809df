"""A rollout's lifecycle records, typed: the one model of ``rollouts.meta`` and of the rollout's queue state.

Four services write a rollout's lifecycle facts, each its own part, and all of them read and write only here:
- the api's scheduler (``services/api/scheduler.py``) its **queue state** (``QueueState``): when the outbox sent
  the rollout to the queue (``enqueued_at``) and, for one the runner put back, when it may be sent again
  (``retry_at``) and why it waits (``waiting_for``). These are columns of ``rollouts`` (migration 0010), so the
  outbox query is plain SQL on indexed columns: ``awaiting_send()`` is its condition;
- the runner (``services/runner/rollout.py``) one ``AttemptReport`` per attempt (``add_attempt``), and puts a
  rollout back in the queue with ``retry_later``;
- the grader (``services/grader/grade.py``) its grading attempts, the grading sandbox's isolation and the logs of
  a grading that gave no reward (``start_grading``, ``record_grading``);
- the learner (``services/learner/loop.py``) why it set the rollout's group aside (``set_aside``).
The api's rollout view (``GET /v1/rollouts/{id}``) returns ``RolloutMeta`` and ``QueueState`` as they are here.

``rollouts.meta`` holds ``RolloutMeta.to_json()``. Reading is checked (``read_meta``): a key this model does not
know or a value of the wrong type is refused with ``RolloutMetaError``, naming the rollout and the key's path
(``attempts.0.calls``), never a ``KeyError`` inside a service. Rows written before a field existed read as its
default (an attempt report without ``patch_refused`` has none; ``{}`` is a rollout nobody has written to yet).
Adding a field: give it a default that means "not recorded", and old rows need no migration; renaming or
removing one does (``migrations/versions/0010_rollout_queue_columns.py`` moved the queue keys out of ``meta``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy import ColumnElement, and_, func, or_

from shared.models import Rollout


class RolloutMetaError(ValueError):
    """A rollout's ``meta`` does not validate as ``RolloutMeta``: the rollout and the offending key are named."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, validated like a stored row (an unknown field or a wrong type is refused)."""
        return self.model_validate({**self.model_dump(), **changes})


class ContextNumbers(_Record):
    """The prompt the gateway refused for not fitting the model's context (``shared/context_fit.py``)."""

    prompt_tokens: int
    context_length: int
    at_least: bool = False
    """``prompt_tokens`` is a lower bound: the gateway refused before tokenizing."""


class AttemptIncident(_Record):
    """An infrastructure failure seen while the attempt ran (``shared/incidents.py: Incident``)."""

    cause: str
    detail: str
    at: float


class AttemptReport(_Record):
    """Facts of one runner attempt, in ``RolloutMeta.attempts`` and the attempt's ``report.json`` log.
    ``outcome``/``reason``: the harness adapter's verdict; ``classified``: the rollout outcome it led to (None: up
    to the grader)."""

    attempt: int
    outcome: str
    reason: str | None
    exit_code: int | None
    isolation: str | None
    materialize_s: float
    harness_s: float
    patch_bytes: int
    calls: int
    killed_reason: str | None = None
    runner_error: str | None = None
    incidents: tuple[AttemptIncident, ...] = ()
    classified: str | None = None
    context: ContextNumbers | None = None
    touched_protected_paths: tuple[str, ...] = ()
    git_history_commands: tuple[str, ...] = ()
    capture_lost: str | None = None
    """The flush barrier: calls replied to whose records will never land."""
    patch_refused: str | None = None
    """Why the workspace could not be diffed safely (``services/runner/patch.py: PatchRefused``)."""


class RolloutMeta(_Record):
    """The whole of ``rollouts.meta``. Every field defaults to "not recorded", so ``{}`` validates."""

    attempts: tuple[AttemptReport, ...] = ()
    """The runner's attempts, oldest first."""
    context: ContextNumbers | None = None
    """The last attempt's refused prompt, when the gateway refused one (``outcome_reason = 'context'``)."""
    grade_attempts: int = 0
    """Grading attempts the grader started (its retry budget counts them)."""
    grading_isolation: str | None = None
    """The grading sandbox's isolation, once a reward is recorded."""
    grading_logs_key: str | None = None
    """The grading's logs, when it ended without a reward (stopped, or an infrastructure failure)."""
    reward_fn: str | None = None
    """This rollout's reward function over the run's ``RunConfig.reward_fn`` (set by tests and benchmarks)."""
    learner_set_aside: str | None = None
    """Why the learner set the rollout's group aside (its ``groups.error``)."""

    def to_json(self) -> dict[str, Any]:
        """What ``rollouts.meta`` stores: the fields that were recorded (a top-level field at its default is left
        out, as the services always wrote it; an attempt report is stored whole)."""
        stored = self.model_dump(mode="json")
        fields = type(self).model_fields
        return {name: value for name, value in stored.items() if getattr(self, name) != fields[name].default}

    @classmethod
    def from_json(cls, raw: Any, *, rollout_id: str = "?") -> RolloutMeta:
        if raw is None:
            return cls()
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            where = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(meta)'}: {e['msg']}" for e in exc.errors())
            raise RolloutMetaError(
                f"rollout {rollout_id}: rollouts.meta does not validate: {where}"
            ) from None

    @property
    def last_attempt(self) -> AttemptReport | None:
        return self.attempts[-1] if self.attempts else None


class QueueState(_Record):
    """Where the rollout stands with the queue (columns of ``rollouts``; see the scheduler's outbox)."""

    enqueued_at: datetime | None = None
    """When the outbox last sent it; None: to be sent (again)."""
    retry_at: datetime | None = None
    """Not to be sent before this (a rollout the runner put back)."""
    waiting_for: str | None = None
    """Why the runner put it back (infrastructure not ready, a retry after an infrastructure failure)."""


# --- reading -----------------------------------------------------------------------------------------------------


def read_meta(rollout: Rollout) -> RolloutMeta:
    return RolloutMeta.from_json(rollout.meta, rollout_id=rollout.id)


def queue_state(rollout: Rollout) -> QueueState:
    return QueueState(
        enqueued_at=rollout.enqueued_at, retry_at=rollout.retry_at, waiting_for=rollout.waiting_for
    )


def awaiting_send() -> ColumnElement[bool]:
    """The outbox's condition on a queued rollout: not sent since it was (re)queued, and not waiting any more."""
    return and_(
        Rollout.enqueued_at.is_(None), or_(Rollout.retry_at.is_(None), Rollout.retry_at <= func.now())
    )


# --- writing (each changes its own part and keeps the rest) -------------------------------------------------


def _write(rollout: Rollout, meta: RolloutMeta) -> None:
    rollout.meta = meta.to_json()


def add_attempt(rollout: Rollout, report: AttemptReport) -> None:
    """The runner: append an attempt's report (and its refused prompt, if the gateway refused one)."""
    meta = read_meta(rollout)
    context = report.context if report.context is not None else meta.context
    _write(rollout, meta.replace(attempts=(*meta.attempts, report), context=context))


def start_grading(rollout: Rollout) -> int:
    """The grader: count one more grading attempt; returns how many have started, this one included."""
    meta = read_meta(rollout)
    _write(rollout, meta.replace(grade_attempts=meta.grade_attempts + 1))
    return meta.grade_attempts + 1


def record_grading(rollout: Rollout, *, isolation: str | None = None, logs_key: str | None = None) -> None:
    """The grader: the isolation a reward was graded under, or the logs of a grading without a reward."""
    meta = read_meta(rollout)
    changes = {"grading_isolation": isolation, "grading_logs_key": logs_key}
    _write(rollout, meta.replace(**{k: v for k, v in changes.items() if v is not None}))


def set_aside(rollout: Rollout, reason: str) -> None:
    """The learner: why the rollout's group was set aside."""
    _write(rollout, read_meta(rollout).replace(learner_set_aside=reason))


def retry_later(rollout: Rollout, *, delay_s: float, why: str) -> None:
    """The runner: back to the queue; the scheduler's outbox sends it again once ``retry_at`` has passed."""
    rollout.enqueued_at = None
    rollout.retry_at = datetime.now(UTC) + timedelta(seconds=delay_s)
    rollout.waiting_for = why


def enqueued_now() -> dict[str, Any]:
    """The scheduler: the column values that stamp a rollout as sent (an ``UPDATE ... SET``)."""
    return {"enqueued_at": func.now()}
