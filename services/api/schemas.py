"""Wire schemas of the REST API: request bodies (validated, 422 on error) and response documents.

These pydantic models are the single source of the OpenAPI document (``services/api/openapi.py`` builds it
from their JSON schemas), so what is documented is what is validated and what is returned. Run settings the
api does not act on itself (``grpo``, ``sampling``, ``limits``) are stored verbatim, validated, in
``runs.config``, where the learner, gateway and runner read them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.tasks import Task

HARNESSES = ("reference", "codex", "claude-code", "qwen-code", "pi", "shell")
Harness = Literal["reference", "codex", "claude-code", "qwen-code", "pi", "shell"]
RunStatus = Literal["pending", "running", "stopping", "stopped", "completed", "failed"]
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- run settings (stored in runs.config) -----------------------------------------------------------------


class GRPOConfig(_Strict):
    """GRPO knobs; the learner reads ``runs.config["grpo"]`` (names as in ``services/learner/grpo.py``).

    Only the fields a request sets are stored; the learner's defaults (shown here) apply to the rest.
    ``groups_per_step`` is not set here: the api sets it to the number of groups it schedules per step, so one
    learner step consumes exactly one sampling step.
    """

    learning_rate: float = Field(1e-6, gt=0, le=1, description="Optimizer learning rate.")
    baseline: Literal["mean", "leave_one_out"] = Field("mean", description="Group baseline.")
    normalize_std: bool = Field(False, description="Divide advantages by the group's reward std.")
    clip_low: float = Field(0.2, gt=0, lt=1, description="PPO clip: ratio >= 1 - clip_low.")
    clip_high: float = Field(0.28, gt=0, le=10, description="PPO clip: ratio <= 1 + clip_high (clip-higher).")
    tis_cap: float | None = Field(
        2.0, gt=0, le=1000, description="Truncated importance sampling cap for off-policy tokens; null = off."
    )
    aggregation: Literal["token", "sequence"] = Field("token", description="Loss aggregation level.")
    kl_coef: float = Field(0.0, ge=0, le=100, description="Weight of the KL penalty to the reference policy.")
    max_grad_norm: float | None = Field(1.0, gt=0, description="Gradient clipping; null = off.")
    weight_decay: float = Field(0.0, ge=0, le=1)
    strategy: Literal["per_request", "prefix_merging", "trie"] = Field(
        "trie", description="How recorded calls become training sequences."
    )
    max_policy_lag: int = Field(2, ge=0, le=1000, description="Drop groups sampled more versions ago.")
    bf16_autocast: bool = Field(False, description="bfloat16 autocast for the forward pass.")
    seed: int = Field(0, ge=0, le=2**31 - 1)


class SamplingConfig(_Strict):
    """Sampling parameters the gateway applies to every call of the run."""

    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int | None = Field(
        None, ge=1, le=1_000_000, description="Per call; null = the request's own."
    )


class Limits(_Strict):
    """Per-rollout limits the runner enforces; null = the service settings."""

    rollout_timeout_s: float | None = Field(None, gt=0, le=86_400)
    max_calls: int | None = Field(None, ge=1, le=100_000, description="Model calls per rollout.")


class TaskSource(_Strict):
    """Where tasks come from: a bundled dataset by name, a JSONL file on the api host, or inline objects.

    ``dataset`` names a bundled suite (``swe_mini``), or labels ``tasks``/``dataset_file`` (tasks are upserted
    by dataset + instance_id). ``instance_ids`` picks a subset.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [{"required": ["tasks"]}, {"required": ["dataset_file"]}, {"required": ["dataset"]}]
        },
    )

    dataset: str | None = Field(None, pattern=NAME_PATTERN, max_length=100)
    dataset_file: str | None = Field(None, min_length=1, max_length=4096)
    tasks: list[Task] | None = Field(None, min_length=1, max_length=10_000)
    instance_ids: list[str] | None = Field(None, min_length=1, max_length=10_000)

    @model_validator(mode="after")
    def _one_source(self) -> TaskSource:
        if self.tasks is None and self.dataset_file is None and self.dataset is None:
            raise ValueError("name the tasks: 'dataset', 'dataset_file' or 'tasks'")
        if self.tasks is not None and self.dataset_file is not None:
            raise ValueError("give either 'tasks' or 'dataset_file', not both")
        return self


class RunCreate(TaskSource):
    """Body of ``POST /v1/runs``."""

    name: str = Field("", max_length=200)
    model: str = Field(min_length=1, max_length=500, description="Served model alias or model directory.")
    harness: Harness
    harness_command: str | None = Field(
        None,
        min_length=1,
        max_length=10_000,
        description="For harness 'shell': a command with {instruction}.",
    )
    group_size: int = Field(4, ge=1, le=256, description="Rollouts per task per step (GRPO group).")
    groups_per_step: int | None = Field(
        None, ge=1, le=10_000, description="Tasks sampled per step; null = every task of the run."
    )
    steps: int = Field(1, ge=1, le=100_000, description="Learner steps to run.")
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)  # type: ignore[arg-type]
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)  # type: ignore[arg-type]
    limits: Limits = Field(default_factory=Limits)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _shell_needs_command(self) -> RunCreate:
        if self.harness == "shell" and not self.harness_command:
            raise ValueError("harness 'shell' needs 'harness_command' containing {instruction}")
        if self.harness_command is not None and "{instruction}" not in self.harness_command:
            raise ValueError("'harness_command' must contain {instruction}")
        return self


class TasksAdd(TaskSource):
    """Body of ``POST /v1/runs/{run_id}/tasks``."""


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
    status: RunStatus
    model: str
    harness: str
    group_size: int
    steps: int = Field(description="Learner steps requested.")
    current_step: int | None = Field(description="Newest step with scheduled groups; null before the first.")
    policy_version: int
    error: str | None
    created_at: datetime
    updated_at: datetime


class RunPage(BaseModel):
    items: list[RunSummary]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next page; null on the last page.")


class Progress(BaseModel):
    tasks: int
    groups: dict[str, int] = Field(description="Group count by status.")
    rollouts: dict[str, int] = Field(description="Rollout count by status.")
    rollouts_total: int
    rollouts_done: int = Field(description="Graded or failed for good.")
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


class RunDetail(RunSummary):
    config: dict[str, Any]
    progress: Progress
    step_metrics: list[StepMetrics]
    reward_curve: list[RewardPoint]


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
    prompt_tokens: int
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
    prompt_tokens: int
    suffix_tokens: int
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
    error: str | None
    meta: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    reward: RewardOut | None
    patch: Patch | None
    logs: list[ObjectLink]
    chains: list[ChainOut]
    calls: list[CallOut]
