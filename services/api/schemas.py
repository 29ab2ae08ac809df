"""Wire schemas of the REST API: request bodies (validated, 422 on error) and response documents.

These pydantic models are the single source of the OpenAPI document (``services/api/openapi.py`` builds it
from their JSON schemas), so what is documented is what is validated and what is returned. A run's settings are
the shared ``RunSpec``/``RunConfig`` (``shared/run_config.py``): the body of ``POST /v1/runs`` extends the
former, the api stores the latter in ``runs.config``, and every service reads it back with the same model.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.harnesses import HarnessConfig
from shared.rollout_records import QueueState, RolloutMeta
from shared.run_config import (
    NAME_PATTERN,
    GRPOConfig,
    IssueShown,
    LimitsConfig,
    LoraConfig,
    RunConfig,
    RunSpec,
    SamplingConfig,
    SFTSpec,
    TeacherConfig,
)
from shared.statuses import Outcome, RunKind, RunStatus
from shared.tasks import Task


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- requests ---------------------------------------------------------------------------------------------


class TaskSource(_Strict):
    """Where tasks come from: a bundled dataset by name, a JSONL file on the api host, or inline objects.

    ``dataset`` names a bundled suite (``swe_mini``), or labels ``tasks``/``dataset_file`` (tasks are upserted
    by dataset + instance_id). ``split`` picks one split of a bundled dataset, ``instance_ids`` a subset.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [{"required": ["tasks"]}, {"required": ["dataset_file"]}, {"required": ["dataset"]}]
        },
    )

    dataset: str | None = Field(None, pattern=NAME_PATTERN, max_length=100)
    split: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        max_length=100,
        description="A split of the bundled dataset (e.g. 'train').",
    )
    dataset_file: str | None = Field(None, min_length=1, max_length=4096)
    tasks: list[Task] | None = Field(None, min_length=1, max_length=10_000)
    instance_ids: list[str] | None = Field(None, min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _one_source(self) -> TaskSource:
        if self.tasks is None and self.dataset_file is None and self.dataset is None:
            raise ValueError("name the tasks: 'dataset', 'dataset_file' or 'tasks'")
        if self.tasks is not None and self.dataset_file is not None:
            raise ValueError("give either 'tasks' or 'dataset_file', not both")
        if self.split is not None and (self.tasks is not None or self.dataset_file is not None):
            raise ValueError("'split' selects from a bundled 'dataset' only")
        return self


class RunCreate(RunSpec, TaskSource):
    """Body of ``POST /v1/runs``: a ``RunSpec`` (``shared/run_config.py``; every field by its name there), where
    the tasks come from, a name and the groups per step. The api stores it as the run's ``RunConfig``."""

    name: str = Field("", max_length=200)
    groups_per_step: int | None = Field(None, ge=1, le=10_000)
    """Tasks sampled per step; null = every task given at creation (tasks added later join the rotation)."""
    strict: bool = False
    """Refuse (422) instead of warn when the harness's first prompt does not fit the model's context."""


class TasksAdd(TaskSource):
    """Body of ``POST /v1/runs/{run_id}/tasks``."""


class EvalCreate(TaskSource):
    """Body of ``POST /v1/evals``: evaluate one policy on tasks (every task × ``samples``), without training.

    What is evaluated: nothing named = the served model's base weights (version 0); ``run_id`` (+ ``version``,
    default the run's newest) = that run's published version (full weights or its LoRA adapter; version 0 is the
    base weights); ``model_dir`` = another Hugging Face directory of the same architecture on the api/inference
    host (version 0). The eval takes the inference pool like a run (FIFO) and the pool loads that policy."""

    name: str = Field("", max_length=200)
    model: str | None = Field(None, min_length=1, max_length=500)
    """Served model alias the harness asks for; null = the served model name."""
    harness: HarnessConfig
    samples: int = Field(1, ge=1, le=256)
    """Samples per task (pass@k is reported with k = samples)."""
    run_id: str | None = Field(None, min_length=1, max_length=200)
    version: int | None = Field(None, ge=0, le=1_000_000)
    model_dir: str | None = Field(None, min_length=1, max_length=4096)
    seed: int | None = Field(None, ge=0, le=2**31 - 1)
    issue: IssueShown = Field(
        "shown",
        description="withheld: every task's problem statement is replaced by one fixed line (a control of how "
        "much of pass@1 the issue text carries; RunSpec.issue).",
    )
    """Sampling seed (``sampling.seed``): the same seed samples the same calls again."""
    sampling: SamplingConfig = SamplingConfig()
    limits: LimitsConfig = LimitsConfig()
    reward_fn: str = Field("resolved", pattern=NAME_PATTERN, max_length=100)
    teacher: TeacherConfig | None = None
    """Who answers the eval's model calls instead of the evaluated policy (``RunSpec.teacher``): ``reference``
    is refused on eval splits and on tasks without a reference fix."""

    @model_validator(mode="after")
    def _one_policy(self) -> EvalCreate:
        if self.model_dir is not None and (self.run_id is not None or self.version is not None):
            raise ValueError("give either 'model_dir' or 'run_id'/'version', not both")
        if self.run_id is None and self.version not in (None, 0):
            raise ValueError("'version' above 0 needs 'run_id' (the run that published it)")
        if self.seed is not None and self.sampling.seed not in (None, self.seed):
            raise ValueError("'seed' and 'sampling.seed' differ")
        return self


class SFTCreate(SFTSpec):
    """Body of ``POST /v1/sft``: an ``SFTSpec`` (``shared/run_config.py``; every field by its name there) — the
    data selection (``from_run`` + ``min_reward``, or ``where`` over the ``trajectories`` view), epochs, batch
    size, learning rate, seed — plus a name, LoRA or full weights, and the learner's ``grpo`` knobs. The api
    resolves the selection before it writes anything; one that selects no finished rollout with model calls is a
    422."""

    name: str = Field("", max_length=200)
    lora: LoraConfig | None = None
    """Train a LoRA adapter with these settings; null = full weights."""
    grpo: GRPOConfig = GRPOConfig()
    """The learner's reconstruction, optimizer and checkpoint knobs (``strategy``, ``max_pack_tokens``,
    ``adam_*``, ``max_grad_norm``, ``bf16_autocast``, ``checkpoint_every``, ...); its ``learning_rate`` and
    ``seed`` are replaced by this body's."""


# --- responses --------------------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    loc: str = Field(description="Dotted path of the offending field, e.g. 'body.grpo.clip_low'.")
    msg: str
    type: str


class Error(BaseModel):
    error: str = Field(
        description="Machine-readable code: unauthorized, not_found, validation_error, conflict."
    )
    message: str
    detail: list[ErrorDetail] = Field(default_factory=list)


class Health(BaseModel):
    status: Literal["ok"]


class RunSummary(BaseModel):
    id: str
    name: str
    kind: RunKind = RunKind.TRAIN
    status: RunStatus
    model: str
    harness: str
    group_size: int
    steps: int | None = Field(description="Learner steps requested; null when the stored config is invalid.")
    current_step: int | None = Field(description="Newest step with scheduled groups; null before the first.")
    steps_done: int = Field(0, description="Learner steps committed (one per finished sampling step).")
    policy_version: int
    error: str | None
    config_error: str | None = Field(
        None,
        description="Why the run's stored config does not validate (e.g. written by an older version); the run "
        "is still listed, with its config-derived fields null, and the scheduler fails it with this reason.",
    )
    created_at: datetime
    updated_at: datetime


class RunPage(BaseModel):
    items: list[RunSummary]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last page.")


class Progress(BaseModel):
    tasks: int | None = Field(description="Tasks of the run; null when the stored config is invalid.")
    groups: dict[str, int] = Field(description="Group count by status.")
    rollouts: dict[str, int] = Field(description="Rollout count by status.")
    rollouts_total: int
    rollouts_done: int = Field(description="Graded, failed for good, or cancelled.")
    steps_done: int = Field(description="Learner steps committed.")


class StepMetrics(BaseModel):
    step: int
    policy_version: int
    loss: float | None
    clip_fraction: float | None
    kl: float | None
    reward_mean: float | None
    reward_std: float | None
    tokens: int
    policy_lag_mean: float | None
    step_time_s: float | None
    groups_trained: int
    groups_stale: int
    groups_zero_variance: int
    groups_set_aside: int
    metrics: dict[str, Any]
    created_at: datetime


class RewardPoint(BaseModel):
    step: int = Field(description="Sampling step (the groups' step).")
    rollouts: int = Field(description="Graded rollouts of the step.")
    reward_mean: float
    reward_std: float
    reward_min: float
    reward_max: float
    resolved_rate: float


class EvalPoint(BaseModel):
    """One eval a training run scheduled (``config.eval``): pass@1 of the version it served before ``at_step``."""

    eval_id: str
    status: RunStatus
    at_step: int
    version: int
    samples: int | None
    pass_at_1: float | None
    pass_at_1_low: float | None
    pass_at_1_high: float | None


class RunDetail(RunSummary):
    config: RunConfig | None = Field(
        description="The stored config; null when it is invalid (see config_error)."
    )
    progress: Progress
    step_metrics: list[StepMetrics]
    reward_curve: list[RewardPoint]
    eval_curve: list[EvalPoint] = Field(
        default_factory=list, description="The run's scheduled evals (config.eval), oldest first."
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="Set by POST /v1/runs: what will likely fail, e.g. a first prompt longer than the context.",
    )


class EvalResult(BaseModel):
    """An eval's figures (``shared/eval_stats.py``): pass@1 over graded samples, pass@k (k = samples per task)
    over tasks, each with its 95 % Wilson interval."""

    tasks: int
    samples: int = Field(description="Graded samples (the pass@1 denominator).")
    failed: int = Field(description="Samples that ended without a reward (failed for good or cancelled).")
    passed: int
    k: int
    pass_at_1: float
    pass_at_1_interval: tuple[float, float]
    pass_at_k: float
    pass_at_k_interval: tuple[float, float]
    reward_mean: float | None


class EvalDetail(BaseModel):
    id: str = Field(description="The eval's id (its run: rollouts, calls and rewards are that run's rows).")
    name: str
    status: RunStatus
    error: str | None
    source: Literal["base", "weights", "adapter", "model_dir"]
    source_run_id: str | None
    version: int = Field(description="The evaluated policy version (what its calls record).")
    model_dir: str | None
    at_step: int | None
    dataset: str
    split: str | None
    harness: str
    samples_per_task: int
    seed: int | None
    rollouts_total: int
    rollouts_done: int
    policy_versions: list[int] = Field(description="Distinct policy versions the eval's calls recorded.")
    result: EvalResult | None = Field(description="Null until every rollout has ended.")
    created_at: datetime
    finished_at: datetime | None


class EvalSample(BaseModel):
    """One sample of an eval: what ``harnessrl eval compare`` pairs with the same sample of another eval."""

    instance_id: str = Field(description="The task's instance id.")
    rollout_id: str = Field(
        description="The sample's rollout (GET /v1/rollouts/{id}: its patch, calls, reward)."
    )
    index: int = Field(
        description="The sample's index among the task's samples (its rollout's index in group)."
    )
    sampling_seed: int | None = Field(
        description="The rollout's sampling seed; null when the eval was unseeded."
    )
    passed: bool | None = Field(
        description="Whether its patch resolved the task; null when it was never graded."
    )


class EvalSamples(BaseModel):
    eval_id: str
    samples: list[EvalSample] = Field(description="Every sample, by instance id then index.")


class TasksAdded(BaseModel):
    run_id: str
    added: list[str] = Field(description="Task ids newly attached to the run.")
    tasks: int = Field(description="Tasks of the run after the call.")


class TaskRef(BaseModel):
    id: str
    dataset: str
    instance_id: str


class ObjectLink(BaseModel):
    key: str
    url: str = Field(description="Presigned GET URL (file:// for the local object store).")


class Patch(ObjectLink):
    size_bytes: int
    text: str = Field(description="The diff, cut at 256 KiB (see 'truncated').")
    truncated: bool


class RewardOut(BaseModel):
    reward: float
    resolved: bool
    reward_fn: str
    outcome: str
    tests: dict[str, Any] = Field(description="Per-test outcomes as the grader recorded them.")
    grading_s: float | None
    logs: ObjectLink | None


class ChainOut(BaseModel):
    id: int
    parent_chain_id: int | None
    fork_reason: str | None
    n_calls: int
    suffix_tokens: int = Field(
        description="Prompt ids the chain's calls added (shared/trajectory.py suffix_ids)."
    )
    sampled_tokens: int


class CallOut(BaseModel):
    id: int
    chain_id: int
    position: int
    parent_call_id: int | None
    fork_reason: str | None
    provider_api: str
    model_alias: str
    stream: bool
    prompt_tokens: int = Field(description="The whole prompt the model was given.")
    suffix_tokens: int = Field(
        description="Of the prompt, the ids new to the chain (its segment's suffix_ids)."
    )
    completion_tokens: int
    finish_reason: str
    tool_call_count: int
    parse_error: str | None
    policy_version: int
    queue_ms: float
    inference_ms: float
    total_ms: float
    ttfb_ms: float | None
    created_at: datetime


class RolloutDetail(BaseModel):
    id: str
    run_id: str
    group_id: str | None
    step: int | None
    index_in_group: int
    task: TaskRef
    harness: str
    status: str
    attempt: int
    isolation: str | None
    policy_version_start: int | None
    harness_exit_code: int | None
    harness_outcome: str | None
    outcome: Outcome | None = Field(
        description="What happened (shared/statuses.py); null until the rollout ends. resolved/unresolved come "
        "from the grader; harness_error, limit, infrastructure_error and cancelled say why it did not end normally."
    )
    outcome_reason: str | None = Field(description="Short cause, e.g. limit:wall_clock, gateway_restarted.")
    error: str | None
    meta: RolloutMeta | None = Field(
        description="The runner's attempt reports, the grader's attempts and the learner's set-aside reason "
        "(shared/rollout_records.py); null when the stored record does not validate (see meta_error)."
    )
    meta_error: str | None = None
    queue: QueueState
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    reward: RewardOut | None
    patch: Patch | None
    logs: list[ObjectLink]
    chains: list[ChainOut]
    calls: list[CallOut]
