"""The SQLAlchemy data model: the tables every service writes its own rows into (docs/design.md#data).

Postgres is the source of truth for everything small; token arrays, patches, logs and weights live in the object
store and rows hold their keys. Statuses (``shared/statuses.py``) are constrained with CHECKs so a bad write
fails loudly. The views ``trajectories`` and ``call_log`` are defined by the migrations (the newest one that
creates a view holds its current text: ``trajectories`` in ``0007_evals.py``, ``call_log`` in
``0001_initial_schema_and_views.py``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from shared.run_config import RunConfig
from shared.statuses import (
    GROUP_STATUSES,
    ROLLOUT_OUTCOMES,
    ROLLOUT_STATUSES,
    RUN_KINDS,
    RUN_STATUSES,
    WEIGHT_STATUSES,
    RunKind,
)
from shared.trajectory import CALL_SOURCES, POLICY

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PROVIDER_APIS = ("openai_chat", "openai_responses", "anthropic_messages", "gemini")
FORK_REASONS = (
    "compaction",
    "edited_history",
    "retry",
    "subagent",
    "tools_changed",
    "system_changed",
    "truncated_history",
    "new_conversation",
)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSONB, list[Any]: JSONB}


def _now() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


def run_kind(config: RunConfig) -> str:
    """``runs.kind`` of a run with ``config``: an SFT run carries ``sft``, an eval its ``target``."""
    if config.sft is not None:
        return RunKind.SFT
    return RunKind.TRAIN if config.target is None else RunKind.EVAL


class Run(Base):
    """One run: a training run, or an eval (``kind``, ``shared/statuses.py: RunKind``). ``config`` is a
    ``shared.run_config.RunConfig`` (read it with ``read_run_config``); ``model``, ``harness``, ``group_size`` and
    ``kind`` are copies for SQL, written once by ``Run.create``."""

    __tablename__ = "runs"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, nullable=False, default="")
    kind: Mapped[str] = mapped_column(Text, nullable=False, default="train", server_default="train")
    status: Mapped[str] = mapped_column(Text, nullable=False, default="pending")
    model: Mapped[str] = mapped_column(Text, nullable=False)
    harness: Mapped[str] = mapped_column(Text, nullable=False)
    group_size: Mapped[int] = mapped_column(Integer, nullable=False)
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    policy_version: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    idempotency_key: Mapped[str | None] = mapped_column(Text, unique=True)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )
    __table_args__ = (
        CheckConstraint(_in("status", RUN_STATUSES), name="status"),
        CheckConstraint(_in("kind", RUN_KINDS), name="kind"),
        CheckConstraint("group_size > 0", name="group_size_positive"),
        CheckConstraint("policy_version >= 0", name="policy_version_non_negative"),
    )

    @classmethod
    def create(cls, id: str, config: RunConfig, **columns: Any) -> Run:
        """A new run row storing ``config`` (its column copies filled from it)."""
        return cls(
            id=id,
            kind=run_kind(config),
            model=config.model,
            harness=config.harness.name,
            group_size=config.group_size,
            config=config.model_dump(mode="json"),
            **columns,
        )


class Task(Base):
    """A task instance (SWE-bench field names); ``spec`` holds the whole validated task."""

    __tablename__ = "tasks"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    dataset: Mapped[str] = mapped_column(Text, nullable=False)
    instance_id: Mapped[str] = mapped_column(Text, nullable=False)
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (UniqueConstraint("dataset", "instance_id", name="uq_tasks_dataset_instance"),)


class Group(Base):
    """The ``size`` rollouts of one task sampled for one learner step (a GRPO group)."""

    __tablename__ = "groups"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="RESTRICT"), nullable=False)
    step: Mapped[int] = mapped_column(Integer, nullable=False)
    size: Mapped[int] = mapped_column(Integer, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, default="pending")
    policy_version: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    stream_entry_id: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)  # why the group was set aside (status failed)
    created_at: Mapped[datetime] = _now()
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    consumed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        CheckConstraint(_in("status", GROUP_STATUSES), name="status"),
        CheckConstraint("size > 0", name="size_positive"),
    )


class Rollout(Base):
    """One run of a harness on one task in a sandbox."""

    __tablename__ = "rollouts"
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True)
    group_id: Mapped[str | None] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"), index=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="RESTRICT"), nullable=False)
    index_in_group: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    harness: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, default="queued")
    # Issued by the runner's claim, new for every attempt (the harness's API key); NULL until the first claim.
    rollout_key: Mapped[str | None] = mapped_column(Text, unique=True)
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    isolation: Mapped[str | None] = mapped_column(Text)
    policy_version_start: Mapped[int | None] = mapped_column(Integer)
    harness_exit_code: Mapped[int | None] = mapped_column(Integer)
    harness_outcome: Mapped[str | None] = mapped_column(Text)
    patch_key: Mapped[str | None] = mapped_column(Text)
    logs_key: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    # What happened (shared/statuses.py: Outcome), set when the rollout ends, and a short machine-readable cause
    # (e.g. limit:wall_clock, gateway_restarted, no_calls, run_stopped).
    outcome: Mapped[str | None] = mapped_column(Text)
    outcome_reason: Mapped[str | None] = mapped_column(Text)
    # Reward-hack watch (services/runner/guard.py): protected files the agent's patch changed, and git commands
    # it ran that look past the checked-out history. Empty lists when it did neither.
    touched_protected_paths: Mapped[list[Any]] = mapped_column(
        JSONB, nullable=False, default=list, server_default="[]"
    )
    git_history_commands: Mapped[list[Any]] = mapped_column(
        JSONB, nullable=False, default=list, server_default="[]"
    )
    # The rollout's sampling seed when its run's ``sampling.seed`` is set (``shared/sampling_seed.py``); each of its
    # calls samples with a seed derived from it and the call's index.
    sampling_seed: Mapped[int | None] = mapped_column(BigInteger)
    # The queue state (``shared/rollout_records.py: QueueState``): when the scheduler's outbox sent the rollout to
    # the queue, and for one the runner put back, when it may be sent again and why it waits.
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    retry_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    waiting_for: Mapped[str | None] = mapped_column(Text)
    # ``shared/rollout_records.py: RolloutMeta`` (attempt reports, grading, the learner's set-aside reason); read and
    # written only through that module.
    meta: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = _now()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        CheckConstraint(_in("status", ROLLOUT_STATUSES), name="status"),
        CheckConstraint(f"outcome IS NULL OR {_in('outcome', ROLLOUT_OUTCOMES)}", name="outcome"),
        CheckConstraint("attempt >= 0", name="attempt_non_negative"),
        UniqueConstraint("group_id", "index_in_group", name="uq_rollouts_group_index"),
    )


class Chain(Base):
    """Calls that extend each other: one training sequence. A fork starts a new chain with a reason."""

    __tablename__ = "chains"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    rollout_id: Mapped[str] = mapped_column(
        ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False, index=True
    )
    parent_chain_id: Mapped[int | None] = mapped_column(ForeignKey("chains.id", ondelete="SET NULL"))
    fork_reason: Mapped[str | None] = mapped_column(Text)
    tokens_prefix: Mapped[str] = mapped_column(Text, nullable=False)
    n_calls: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    # Sums over the chain's calls of their segments' suffix ids and sampled ids (shared/trajectory.py): together
    # the length of the chain's token sequence.
    suffix_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    sampled_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        CheckConstraint(f"fork_reason IS NULL OR {_in('fork_reason', FORK_REASONS)}", name="fork_reason"),
    )


class Call(Base):
    """One model request made by a harness through the gateway."""

    __tablename__ = "calls"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    rollout_id: Mapped[str] = mapped_column(
        ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False, index=True
    )
    chain_id: Mapped[int] = mapped_column(
        ForeignKey("chains.id", ondelete="CASCADE"), nullable=False, index=True
    )
    parent_call_id: Mapped[int | None] = mapped_column(ForeignKey("calls.id", ondelete="SET NULL"))
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    fork_reason: Mapped[str | None] = mapped_column(Text)
    provider_api: Mapped[str] = mapped_column(Text, nullable=False)
    model_alias: Mapped[str] = mapped_column(Text, nullable=False, default="")
    stream: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    # The full prompt the model was given; of it, the ids new to the chain (its segment's suffix_ids); the sampled.
    prompt_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    suffix_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    completion_tokens: Mapped[int] = mapped_column(Integer, nullable=False)
    finish_reason: Mapped[str] = mapped_column(Text, nullable=False)
    tool_call_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    parse_error: Mapped[str | None] = mapped_column(Text)
    policy_version: Mapped[int] = mapped_column(Integer, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False, default=POLICY, server_default=POLICY)
    """Who produced the sampled ids: ``policy``, or ``teacher`` (``shared/trajectory.py``: its segment has no
    logprobs, and GRPO never trains it)."""
    retemplate_drift: Mapped[bool | None] = mapped_column(Boolean)
    queue_ms: Mapped[float] = mapped_column(Double, nullable=False, default=0.0)
    inference_ms: Mapped[float] = mapped_column(Double, nullable=False, default=0.0)
    total_ms: Mapped[float] = mapped_column(Double, nullable=False, default=0.0)
    ttfb_ms: Mapped[float | None] = mapped_column(Double)
    tokens_key: Mapped[str] = mapped_column(Text, nullable=False)
    raw_key: Mapped[str | None] = mapped_column(Text)
    notes: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (
        CheckConstraint(_in("provider_api", PROVIDER_APIS), name="provider_api"),
        CheckConstraint(f"fork_reason IS NULL OR {_in('fork_reason', FORK_REASONS)}", name="fork_reason"),
        CheckConstraint(_in("source", CALL_SOURCES), name="source"),
        CheckConstraint(
            "prompt_tokens >= 0 AND completion_tokens >= 0 AND suffix_tokens >= 0", name="lengths"
        ),
        UniqueConstraint("chain_id", "position", name="uq_calls_chain_position"),
    )


class Reward(Base):
    """The grader's verdict on one rollout (at most one per rollout)."""

    __tablename__ = "rewards"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    rollout_id: Mapped[str] = mapped_column(
        ForeignKey("rollouts.id", ondelete="CASCADE"), nullable=False, unique=True
    )
    reward: Mapped[float] = mapped_column(Double, nullable=False)
    reward_fn: Mapped[str] = mapped_column(Text, nullable=False, default="resolved")
    resolved: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    tests: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    outcome: Mapped[str] = mapped_column(Text, nullable=False, default="graded")
    logs_key: Mapped[str | None] = mapped_column(Text)
    grading_s: Mapped[float | None] = mapped_column(Double)
    # The grader refused the patch, did not trust its report, or saw it reach into the test framework
    # (``services/grader/test_runner.py``); the reason says which.
    reward_hack_suspected: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=False, server_default="false"
    )
    reward_hack_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = _now()


class Step(Base):
    """One learner step and its metrics."""

    __tablename__ = "steps"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)
    step: Mapped[int] = mapped_column(Integer, nullable=False)
    policy_version: Mapped[int] = mapped_column(Integer, nullable=False)
    loss: Mapped[float | None] = mapped_column(Double)
    clip_fraction: Mapped[float | None] = mapped_column(Double)
    kl: Mapped[float | None] = mapped_column(Double)
    reward_mean: Mapped[float | None] = mapped_column(Double)
    reward_std: Mapped[float | None] = mapped_column(Double)
    tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    policy_lag_mean: Mapped[float | None] = mapped_column(Double)
    step_time_s: Mapped[float | None] = mapped_column(Double)
    groups_trained: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    groups_stale: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    groups_zero_variance: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    groups_set_aside: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = _now()
    __table_args__ = (UniqueConstraint("run_id", "step", name="uq_steps_run_step"),)


class Weight(Base):
    """A published policy version and what the inference service did with it."""

    __tablename__ = "weights"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    object_key: Mapped[str] = mapped_column(Text, nullable=False)
    status: Mapped[str] = mapped_column(Text, nullable=False, default="published")
    size_bytes: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    swap_ms: Mapped[float | None] = mapped_column(Double)
    created_at: Mapped[datetime] = _now()
    applied_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        CheckConstraint(_in("status", WEIGHT_STATUSES), name="status"),
        CheckConstraint("version > 0", name="version_positive"),
        UniqueConstraint("run_id", "version", name="uq_weights_run_version"),
    )


class Eval(Base):
    """An evaluation and, once every rollout of it has ended, its figures (written by the api's scheduler). ``run_id``
    is the eval's own run (``runs.kind = 'eval'``: its rollouts, rewards and calls are that run's rows);
    ``source_run_id`` and ``version`` the evaluated policy (the run that published it, null for the base model or a
    model directory), ``at_step`` the training step that scheduled it. Copies of its config's target for SQL;
    pass@k is the unbiased estimator over ``samples_per_task`` samples (k = samples_per_task); intervals are 95 %
    Wilson intervals (``shared/eval_stats.py``)."""

    __tablename__ = "evals"
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    source_run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), index=True)
    version: Mapped[int] = mapped_column(Integer, nullable=False)
    source: Mapped[str] = mapped_column(Text, nullable=False)
    model_dir: Mapped[str | None] = mapped_column(Text)
    at_step: Mapped[int | None] = mapped_column(Integer)
    dataset: Mapped[str] = mapped_column(Text, nullable=False)
    split: Mapped[str | None] = mapped_column(Text)
    harness: Mapped[str] = mapped_column(Text, nullable=False)
    samples_per_task: Mapped[int] = mapped_column(Integer, nullable=False)
    seed: Mapped[int | None] = mapped_column(BigInteger)
    tasks: Mapped[int] = mapped_column(Integer, nullable=False)
    samples: Mapped[int | None] = mapped_column(Integer)
    """Rollouts that were graded (the pass@1 denominator); failed and cancelled ones are counted in ``failed``."""
    failed: Mapped[int | None] = mapped_column(Integer)
    passed: Mapped[int | None] = mapped_column(Integer)
    pass_at_1: Mapped[float | None] = mapped_column(Double)
    pass_at_1_low: Mapped[float | None] = mapped_column(Double)
    pass_at_1_high: Mapped[float | None] = mapped_column(Double)
    pass_at_k: Mapped[float | None] = mapped_column(Double)
    pass_at_k_low: Mapped[float | None] = mapped_column(Double)
    pass_at_k_high: Mapped[float | None] = mapped_column(Double)
    reward_mean: Mapped[float | None] = mapped_column(Double)
    created_at: Mapped[datetime] = _now()
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    __table_args__ = (
        CheckConstraint("source IN ('base', 'weights', 'adapter', 'model_dir')", name="source"),
        CheckConstraint("samples_per_task > 0", name="samples_per_task_positive"),
    )


Index("ix_calls_rollout_created", Call.rollout_id, Call.created_at)
