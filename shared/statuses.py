"""Every lifecycle status and the rollout outcome, defined once; services, the API schema, the CLI and the
database CHECK constraints all use these.

Run kinds (``runs.kind``)
------------------------
- ``train``: a GRPO run; one learner trains on its groups.
- ``eval``: an evaluation (``harnessrl eval``, ``POST /v1/evals``, or scheduled by a training run's
  ``config.eval``): one step of ``samples`` rollouts per task, graded, never trained on (the grader appends its
  groups to no stream and no learner is started for it); it takes the inference pool like a training run, and
  its figures land in its ``evals`` row when every rollout has ended.
- ``sft``: supervised fine-tuning on recorded rollouts (``harnessrl sft``, ``POST /v1/sft``): no rollouts of its
  own, no groups, never on the inference pool; its learner trains epochs of cross-entropy on the selected
  rollouts' sampled tokens, commits a step and publishes a version per batch, and completes the run itself.

Lifecycles
----------
- **Run**: ``queued`` (waiting for its turn on the inference pool, ``Settings.pool_exclusive``) → ``running`` →
  ``completed`` | ``failed`` (with ``runs.error``), or ``stopping`` → ``stopped`` after ``POST /v1/runs/{id}/stop``.
  With the pool shared as it is, the api creates a run ``running``. ``pending`` is the status of rows written by
  older versions; nothing writes it any more.
- **Group**: ``pending`` → ``complete`` (appended to the run's groups stream) → ``consumed`` (a learner step used
  or dropped it) | ``failed`` (set aside, ``groups.error`` says why).
- **Rollout**: ``queued`` → ``running`` → ``finished`` → ``grading`` → ``graded``; or ``failed`` (for good, no
  reward) or ``cancelled`` (its run was stopped). A rollout whose attempt failed for an infrastructure reason
  goes back to ``queued`` while the retry budget lasts.
- **Weight**: ``published`` → ``loading`` → ``served`` | ``rejected`` | ``failed``.

Rollout outcome (``rollouts.outcome``, with a short ``rollouts.outcome_reason``)
-------------------------------------------------------------------------------
What happened, as opposed to where the row is in its lifecycle. Set when the rollout ends; NULL before.

====================== ========= ============================================================================
outcome                rewarded  when
====================== ========= ============================================================================
resolved               yes       the harness ended normally and the grader found every listed test passing
unresolved             yes       the harness ended normally and some listed test did not pass
harness_error          if calls  the harness failed on its own (non-zero exit, a reply that broke its protocol,
                                 a refused request of its own making). The model took part, so a rollout with
                                 calls is graded like any other; one with no calls has nothing to grade and ends
                                 ``failed`` (reason ``no_calls``). Reason ``context``: the gateway refused a
                                 prompt longer than the model's context; the error and ``RolloutMeta.context``
                                 carry both numbers (``shared/context_fit.py``). Reason ``patch_refused``: the
                                 runner refused to diff what the agent left in its workspace (a special file, a
                                 nested repository, files over the patch's limits); its patch is empty
limit                  if calls  a limit ended it: the sandbox's wall clock, memory or disk, or a run's
                                 per-rollout limit. ``outcome_reason`` is ``limit:<name>`` (``limit_reason``)
infrastructure_error   never     something that is not the model failed: the gateway or inference was
                                 unreachable, restarted or answered 5xx during the attempt; the runner or
                                 grader crashed; the repository could not be fetched. Retried within
                                 ``settings.rollout_retries``; when the budget is spent the rollout ends
                                 ``failed`` and the learner sets its whole group aside with the reason
cancelled              never     its run was stopped before or while it ran; its group is set aside
====================== ========= ============================================================================

A harness failure counts as an infrastructure error only with evidence the runner trusts (the sandbox's
contents are the agent's and prove nothing): an incident the gateway recorded for the rollout, or a gateway or
inference process that (re)started during the attempt (``shared/incidents.py``). A run fails when every
rollout of a step ended ``harness_error`` or ``infrastructure_error`` (``RUN_FAILING_OUTCOMES``).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    QUEUED = "queued"
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    COMPLETED = "completed"
    FAILED = "failed"


class RunKind(StrEnum):
    TRAIN = "train"
    EVAL = "eval"
    SFT = "sft"


class GroupStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    CONSUMED = "consumed"


class RolloutStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    GRADING = "grading"
    GRADED = "graded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class WeightStatus(StrEnum):
    PUBLISHED = "published"
    LOADING = "loading"
    SERVED = "served"
    REJECTED = "rejected"
    FAILED = "failed"


class Outcome(StrEnum):
    RESOLVED = "resolved"
    UNRESOLVED = "unresolved"
    HARNESS_ERROR = "harness_error"
    INFRASTRUCTURE_ERROR = "infrastructure_error"
    CANCELLED = "cancelled"
    LIMIT = "limit"


def values(enum: type[StrEnum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum)


RUN_STATUSES = values(RunStatus)
RUN_KINDS = values(RunKind)
GROUP_STATUSES = values(GroupStatus)
ROLLOUT_STATUSES = values(RolloutStatus)
WEIGHT_STATUSES = values(WeightStatus)
ROLLOUT_OUTCOMES = values(Outcome)

# Run kinds a learner trains (the learner controller starts one for each such run that is active).
LEARNER_KINDS = (RunKind.TRAIN, RunKind.SFT)
# A run in one of these takes no more work.
RUN_FINISHED = (RunStatus.STOPPED, RunStatus.COMPLETED, RunStatus.FAILED)
# A run in one of these holds or waits for the inference pool and is advanced by the scheduler.
RUN_ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.STOPPING)
# The rollout will change no more (the grader and group completion count these).
ROLLOUT_TERMINAL = (RolloutStatus.GRADED, RolloutStatus.FAILED, RolloutStatus.CANCELLED)
# The harness is done with it: the runner does not run it again, the gateway takes no more calls for it.
ROLLOUT_CLOSED = (RolloutStatus.FINISHED, RolloutStatus.GRADING, *ROLLOUT_TERMINAL)
# A group with a rollout that ended so is never trained: the learner sets it aside with the reason.
NEVER_TRAINED_OUTCOMES = (Outcome.INFRASTRUCTURE_ERROR, Outcome.CANCELLED)
# A step whose rollouts all ended so fails its run.
RUN_FAILING_OUTCOMES = (Outcome.HARNESS_ERROR, Outcome.INFRASTRUCTURE_ERROR)
# Group steps the scheduler waits for before it moves on.
GROUP_DONE = (GroupStatus.CONSUMED, GroupStatus.FAILED)
# Every rollout graded and the group on the groups stream: what a run whose sampling may run ahead of the learner
# (``grpo.max_policy_lag`` > 0) waits for before it starts its next step.
GROUP_ON_STREAM = (GroupStatus.COMPLETE, *GROUP_DONE)
# Weights the inference service is done with (served, or never will be).
WEIGHT_DONE = (WeightStatus.SERVED, WeightStatus.REJECTED, WeightStatus.FAILED)

LIMIT_PREFIX = "limit:"
# The ``outcome_reason`` of a rollout cancelled because its run was stopped (queued, or killed while it ran).
RUN_STOPPED_REASON = "run_stopped"
# The sandbox's ``killed_reason`` when the runner killed a harness because its run was stopped.
KILLED_RUN_STOPPED = "run_stopped"
# The ``outcome_reason`` (outcome ``harness_error``) of a rollout whose workspace the runner refused to diff: what
# the agent left there (a special file, a nested repository, files over the patch's size limits) could make the
# host's git read outside the workspace or exhaust it. Its patch is empty; with calls it is graded (reward 0).
PATCH_REFUSED_REASON = "patch_refused"


def limit_reason(name: str) -> str:
    """The ``outcome_reason`` of a rollout ended by limit ``name`` (``wall_clock``, ``memory``, ``disk``, ...)."""
    return f"{LIMIT_PREFIX}{name}"


def graded_outcome(resolved: bool) -> Outcome:
    return Outcome.RESOLVED if resolved else Outcome.UNRESOLVED
