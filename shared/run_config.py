"""A run's configuration, typed: the one model of ``runs.config``, written by the api and read by every service.

``RunConfig`` is what a run is: the policy and the harness (with its options), its tasks, how many rollouts a
step samples, how the gateway samples, the limits of one rollout and the GRPO settings. The api builds it from
the request (the REST body ``RunCreate`` is ``RunSpec`` plus where the tasks come from) and stores
``config.model_dump(mode="json")`` in ``runs.config``. Every reader validates it back with
``read_run_config(run)`` (``RunConfig.model_validate`` with the run named in the error): the scheduler (tasks,
steps), the runner (harness, limits), the grader (reward function), the gateway (sampling) and the learner
(``grpo``, ``lora``, ``groups_per_step``). Nobody reads ``runs.config`` as a raw dict.

Rules every section follows:
- Strict and closed: a key the model does not know, or a value of the wrong type, is refused with its path
  (``grpo.clip_low``); the api answers 422 with that path. Nothing is coerced (``"0.1"`` is not a float).
- ``None`` on a per-run setting means "the service setting" (``Settings`` in ``shared/settings.py``): limits,
  the learner's drop bound of ``grpo.max_policy_lag`` (its scheduling default is on-policy, never a service
  setting). The reader resolves it, so stored rows never bake in a service default.
- Immutable (``frozen``): a run's config does not change after creation, except ``task_ids`` growing through
  ``POST /v1/runs/{id}/tasks``.

Adding a section (``lora`` and ``eval`` are ones): one ``_Section`` subclass with defaults that keep today's
behaviour, one field on ``RunSpec`` (REST-settable) or ``RunConfig`` (set by the api) whose default is
``TheSection()`` (sections are frozen, so one default instance is safely shared). Stored rows without the key validate to the defaults, so a new section
needs no migration; renaming or removing a key does (``migrations/versions/0004_typed_run_config.py`` shows how).

The learner's GRPO settings are ``GRPOConfig`` below (``services/learner/grpo.py`` imports it): the knobs, their
bounds and their documentation exist once, here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from shared.harnesses import HarnessConfig

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
MAX_STEPS = 100_000
"""The most steps a run takes (``RunSpec.steps``; an SFT run's epochs x batches)."""
DEFAULT_LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _true_false_or_auto(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """One error for a bad ``bool | "auto"`` (pydantic would give one per union member, at sub-locations)."""
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("bool_or_auto", "Input should be true, false or 'auto'") from None


BoolOrAuto = Annotated[bool | Literal["auto"], WrapValidator(_true_false_or_auto)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, use_attribute_docstrings=True)


class SamplingConfig(_Section):
    """Sampling parameters the gateway applies to every model call of the run (over the harness's own)."""

    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    """Per call; null = the request's own."""
    seed: int | None = Field(None, ge=0, le=2**31 - 1)
    """Seed every call's sampling: each call sends vLLM a seed derived from this one, the task, the step, the
    rollout's index in its group and the call's index in the rollout (``shared/sampling_seed.py``), so running
    the same tasks again with the same seed samples the same tokens wherever the engine is deterministic for a
    seeded request. null = unseeded."""


class LimitsConfig(_Section):
    """Per-rollout limits the runner enforces (``services/runner/rollout.py``); null = the service setting. A
    rollout that reaches one is ended and its row records ``outcome = 'limit'`` with ``outcome_reason =
    'limit:<name>'`` (``limit:wall_clock``, ``limit:memory``, ``limit:processes``, ``limit:calls``,
    ``limit:tokens``), and the error says which value it reached. Like any rollout with model calls it is graded."""

    wall_clock_s: float | None = Field(None, gt=0, le=86_400)
    """Seconds the harness may run; null = the task's ``agent_timeout_s``, else ``Settings.rollout_timeout_s``
    (also the cap: the queue's redelivery window is sized by the service's limit)."""
    memory_bytes: int | None = Field(None, ge=1 << 24, le=1 << 40)
    """Resident memory of the sandbox (its memory cgroup; the address space stays at least the service's, since
    runtimes reserve far more than they touch); null = ``Settings.sandbox_memory_bytes``."""
    processes: int | None = Field(None, ge=8, le=100_000)
    """Processes and threads alive at once in the sandbox, the sandbox's own included; a refused fork ends the
    rollout. null = ``Settings.sandbox_max_processes``."""
    calls: int | None = Field(None, ge=1, le=100_000)
    """Model calls: the rollout ends once it has made this many (checked about once a second); null = no limit."""
    tokens: int | None = Field(None, ge=1, le=1 << 40)
    """Sampled (completion) tokens over all the rollout's calls: the rollout ends once they reach this many
    (checked about once a second); null = no limit."""


class GRPOConfig(_Section):
    """GRPO settings (``services/learner/grpo.py`` implements them), set per run through ``grpo`` by these names."""

    # Advantage ---------------------------------------------------------------------------------------------
    baseline: Literal["mean", "leave_one_out"] = "mean"
    """``mean``: A_i = r_i - mean(r). ``leave_one_out``: A_i = r_i - mean of the others (RLOO; unbiased)."""
    normalize_std: bool = False
    """Divide advantages by the group's reward std (original GRPO). Off by default (Dr. GRPO): it up-weights
    groups that are nearly all-correct or all-wrong, a difficulty bias."""
    std_epsilon: float = Field(1e-6, gt=0, le=1)
    """Added to the std before dividing (``normalize_std``)."""
    overlong_penalty: float = Field(0.0, ge=0, le=10)
    """Taken from the reward a rollout earned (never below 0) when one of its model calls was cut by its token
    limit (``calls.finish_reason = 'length'``), before the group's advantages and its reward variance are
    computed: a harness that applies the first usable code block rewards a right block followed by repetition
    to the limit, and this makes stopping pay. Cut answers that earned nothing are not charged: charging them
    (attempt 17 in docs/perf/learning.md) puts a length-only signal into every all-wrong group, which with
    ``normalize_std`` weighs as much as correctness, and the policy learned to stop before the function's end.
    The ``rewards`` rows, the eval and the reported training reward stay the task's. 0 = off."""

    # Policy loss -------------------------------------------------------------------------------------------
    clip_low: float = Field(0.2, ge=0, lt=1)
    """Lower PPO clip: ratio below 1 - clip_low stops pushing a negative-advantage token down."""
    clip_high: float = Field(0.28, ge=0, le=10)
    """Upper PPO clip (clip-higher, DAPO): > clip_low leaves rare good tokens room to grow (less entropy
    collapse)."""
    tis_cap: float | None = Field(2.0, gt=0, le=1000)
    """Truncated importance sampling cap on the ratio's weight; null turns it off."""
    aggregation: Literal["token", "sequence"] = "token"
    """How per-token terms become one loss.
    ``token``: sum over all loss tokens of the batch / their count (DAPO). Every token weighs the same, so a long
    rollout contributes in proportion to its length; no per-rollout length normalization to exploit.
    ``sequence``: mean over rollouts of the rollout's mean token term (original GRPO). Every rollout weighs the
    same, so a token of a short rollout weighs more than one of a long rollout: correct answers are pushed toward
    brevity and wrong long ones are punished weakly per token — the length bias that lets failing rollouts grow.
    A 'sequence' is a rollout (all its chains), never a forwarded sequence, so every strategy agrees."""
    kl_coef: float = Field(0.0, ge=0, le=100)
    """Weight of the k3 KL to the reference model (the initial weights); 0 = no reference model is kept."""

    # Optimizer (AdamW) -------------------------------------------------------------------------------------
    learning_rate: float = Field(1e-6, gt=0, le=1)
    adam_beta1: float = Field(0.9, ge=0, lt=1)
    adam_beta2: float = Field(0.999, ge=0, lt=1)
    adam_epsilon: float = Field(1e-8, gt=0, le=1)
    weight_decay: float = Field(0.0, ge=0, le=1)
    max_grad_norm: float | None = Field(1.0, gt=0, le=1e6)
    """Gradient clipping by global norm; null = off."""

    # Staleness and reconstruction --------------------------------------------------------------------------
    max_policy_lag: int | None = Field(None, ge=0, le=1000)
    """Bounded staleness, one number for the scheduler and the learner. With ``L`` > 0 sampling runs ahead: the
    scheduler starts step k+1 once every group of step k is graded, while the learner still trains on step k, as
    long as sampling stays at most ``L`` versions ahead of the newest served version
    (``services/api/scheduler.py``); the learner drops (and counts as stale) a group whose oldest token was sampled
    more than ``L`` versions before its own, so no trained token is older than ``L``. ``0``: on-policy, step k+1
    samples only once the version trained on step k is served. null (the default): on-policy sampling too, with
    the learner's drop bound ``Settings.max_policy_lag`` (what the learner has always done)."""
    strategy: Literal["per_request", "prefix_merging", "trie"] = "trie"
    """How recorded calls become training sequences (``services/learner/reconstruct.py``)."""
    max_pack_tokens: int = Field(1 << 17, ge=1, le=1 << 30)
    """Token budget of one trie pack (a data-parallel unit of work)."""
    trie_attention: Literal["auto", "blocks", "packed", "flex"] = "auto"
    """The trie's attention path: ``blocks`` (per-segment forwards with fused kernels merged by log-sum-exp; CPU,
    one process), ``packed`` (the same blocks inside one forward per pack; CPU, sharded), ``flex`` (one
    block-sparse FlexAttention call per pack; CUDA), ``auto`` (flex on CUDA, else packed when sharded, else
    blocks)."""
    bf16_autocast: BoolOrAuto = False
    """bfloat16 compute with fp32 master weights, optimizer state and loss: autocast in one process or replicated,
    FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` when sharded. Helps on GPUs and CPUs with
    native bf16 matmuls (AMX, AVX-512); on an AVX2-only CPU bf16 is emulated and a step ~18x slower than fp32.
    ``auto``: bf16 where the learner's device computes it natively (``reconstruct.resolve_bf16``), else fp32; each
    ``steps`` row records what was used (``metrics.compute_dtype``)."""
    seed: int = Field(0, ge=0, le=2**31 - 1)
    """Seeds torch and numpy in the learner."""

    # Scale and durability ---------------------------------------------------------------------------------
    data_parallel: Literal["fsdp", "replicate"] = "fsdp"
    """With several ``torchrun`` ranks: ``fsdp`` shards parameters, gradients and optimizer state (FSDP2, per
    decoder layer); ``replicate`` keeps a whole copy per rank and all-reduces gradients (``distributed.py``)."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer's activations in backward instead of keeping them (less memory, ~1/3 more
    compute)."""
    checkpoint_every: int = Field(10, ge=1, le=100_000)
    """Write a checkpoint (model, optimizer, RNGs, stream position) every this many steps; weights are published
    every step regardless. A restart replays the steps after the last checkpoint from their recorded groups
    (``loop.py``), so a sparser cadence costs replay compute, never data. 10: a 4B model's checkpoint (fp32
    weights + AdamW, ~48 GB) every step would outweigh the step itself, while replaying at most 9 learner-only
    steps (no rollouts: the data is stored) costs minutes."""
    keep_checkpoints: int = Field(2, ge=1, le=1000)
    """Checkpoints kept; older ones are deleted. 2, so a checkpoint half-written by a crash still leaves one."""

    @property
    def sampling_lag(self) -> int:
        """Versions the scheduler lets sampling run ahead of the newest served version: 0 (on-policy) unless the run
        sets ``max_policy_lag``."""
        return self.max_policy_lag or 0

    def drop_lag(self, service_default: int) -> int:
        """The learner's drop bound: the run's ``max_policy_lag``, else the service's (``Settings.max_policy_lag``)."""
        return service_default if self.max_policy_lag is None else self.max_policy_lag


class LoraConfig(_Section):
    """Train (and serve) a low-rank adapter (peft) instead of the full weights; vLLM serves each adapter version
    (``shared/adapters.py``: names, keys, the served adapter)."""

    rank: int = Field(16, ge=1, le=512)
    alpha: float = Field(32.0, gt=0, le=1e6)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: list(DEFAULT_LORA_TARGET_MODULES), min_length=1, max_length=1000
    )
    """Module names (suffixes) peft wraps."""


class EvalConfig(_Section):
    """Evaluations a training run schedules of its own policy (``every_steps``; null = none): at every s in 0, N,
    2N, ... up to ``steps`` (N = ``every_steps``; s = ``steps`` is after the last learner step) the scheduler
    creates an eval run of the version the pool then serves, before sampling step s, and samples on only once the
    eval has ended, so every call of the eval is sampled by that version. Its rollouts are never trained on."""

    every_steps: int | None = Field(None, ge=1, le=100_000)
    dataset: str | None = Field(None, pattern=NAME_PATTERN, max_length=100)
    """A bundled dataset; null = the run's own tasks."""
    split: str | None = Field(None, pattern=NAME_PATTERN, max_length=100)
    """A split of ``dataset`` (e.g. ``eval``); null = the whole dataset."""
    samples: int | None = Field(None, ge=1, le=256)
    """Samples per task; null = the run's ``group_size``."""
    harness: HarnessConfig | None = None
    """null = the run's harness."""


class EvalTarget(_Section):
    """What an eval run evaluates (``RunConfig.target``, set by the api; null on a training run). The inference
    updater reads it when the eval takes the pool and loads it under the eval's name."""

    source: Literal["base", "weights", "adapter", "model_dir"]
    """``base``: the served model directory's own weights, version 0. ``weights``: run ``run_id``'s published
    full weights of ``version`` (its ``weights`` row's object). ``adapter``: that run's LoRA adapter of
    ``version``. ``model_dir``: the weights of another Hugging Face directory of the same architecture, version
    0."""
    run_id: str | None = Field(None, min_length=1, max_length=200)
    """The run whose version is evaluated (null for ``base`` and ``model_dir``)."""
    version: int = Field(0, ge=0)
    """The evaluated policy version (what the eval's calls record)."""
    model_dir: str | None = Field(None, min_length=1, max_length=4096)
    at_step: int | None = Field(None, ge=0)
    """Set when a training run scheduled the eval (``EvalConfig``): the step before which it ran."""


TEACHER_REFERENCE = "reference"
"""``--teacher reference``: the built-in demonstrator (``TeacherConfig.kind = "reference"``)."""
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class TeacherConfig(_Section):
    """Who answers the run's model calls instead of its policy (``RunSpec.teacher``; null = the policy).

    ``url``: any OpenAI-compatible chat endpoint (a bigger model server, a vendor API): the gateway forwards the
    harness's messages and tools to ``<base_url>/chat/completions`` and records the reply. ``reference``: the
    built-in demonstrator (``services/gateway/teacher.py``) acts out the task's reference fix through the
    harness's own protocol; the api refuses it on an eval split and on a task without a reference fix. Either way
    the gateway records the reply as the student would have produced it: ids in the student's chat format,
    ``source = teacher``, no logprobs (``shared/trajectory.py``), and the grader rewards it like any rollout.

    The API key is never stored: ``api_key_env`` names an environment variable of the gateway's process that holds
    it. Nothing of this section reaches the sandbox: only the gateway reads it."""

    kind: Literal["url", "reference"]
    base_url: str | None = Field(None, min_length=1, max_length=2048)
    """``url``: the endpoint's base URL, what an OpenAI client takes (``https://host/v1``); ``/chat/completions``
    is appended. http or https, no user name or password in it (``api_key_env`` says where the key is)."""
    model: str | None = Field(None, min_length=1, max_length=500)
    """``url``: the model the endpoint is asked for; null = the model the harness asks for."""
    api_key_env: str | None = Field(None, pattern=ENV_NAME_PATTERN, max_length=200)
    """``url``: the name of the gateway's environment variable holding the endpoint's API key (sent as
    ``Authorization: Bearer``); null = no key."""
    timeout_s: float = Field(600.0, gt=0, le=3600)
    """``url``: how long one teacher reply may take."""

    @model_validator(mode="after")
    def _fits_kind(self) -> TeacherConfig:
        if self.kind == TEACHER_REFERENCE:
            given = [name for name in ("base_url", "model", "api_key_env") if getattr(self, name) is not None]
            if given:
                raise ValueError(f"the reference teacher takes no {', '.join(given)}")
            return self
        if self.base_url is None:
            raise ValueError(
                "a url teacher needs base_url (an OpenAI-compatible endpoint, e.g. https://host/v1)"
            )
        if why := teacher_url_refusal(self.base_url):
            raise ValueError(why)
        return self

    @classmethod
    def parse(cls, value: str) -> TeacherConfig:
        """What ``--teacher VALUE`` means: ``reference``, or the base URL of a chat endpoint."""
        if value == TEACHER_REFERENCE:
            return cls(kind="reference")
        return cls(kind="url", base_url=value)


def teacher_url_refusal(url: str) -> str | None:
    """Why ``url`` cannot be a teacher's base URL, or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as exc:
        return f"teacher URL {url!r} is not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"teacher URL {url!r} must be an http(s) URL with a host, e.g. https://api.example.com/v1"
    if parts.username is not None or parts.password is not None:
        return "the teacher URL must not hold credentials; name the variable that holds the key (api_key_env)"
    if parts.query or parts.fragment:
        return f"teacher URL {url!r} must be a base URL, without a query or fragment"
    return None


def selection_problem(from_run: str | None, min_reward: float | None, where: str | None) -> str | None:
    """What is wrong with an SFT data selection's fields taken together (None: nothing)."""
    if (from_run is None) == (where is None):
        return "select the data with either 'from_run' or 'where'"
    if min_reward is not None and from_run is None:
        return "'min_reward' filters 'from_run'; put a reward condition into 'where' instead"
    return None


class SFTSpec(_Section):
    """What a user chooses for supervised fine-tuning on recorded rollouts (``POST /v1/sft``, ``harnessrl sft``;
    stored as ``SFTConfig``, ``RunConfig.sft``, on a run of kind ``sft``).

    The data is a selection of rollouts, resolved once when the run is created (``rollout_ids``), so a restart
    trains on exactly what the run started with: ``from_run`` (its rollouts whose reward is at least
    ``min_reward``) or ``where`` (a SQL condition over the ``trajectories`` view, run read-only:
    ``shared/rollout_selection.py``). The loss is the mean cross-entropy of the tokens the policy (or a teacher)
    produced — exactly the loss-mask tokens of each recorded chain — computed through the learner's
    reconstruction (``grpo.strategy``, trie packing by default: a shared prefix is computed once;
    ``services/learner/sft.py``). Each step takes ``batch_rollouts`` rollouts of a seeded shuffle of the
    selection, epoch after epoch, and publishes one version. The optimizer, reconstruction and checkpoint knobs
    other than the learning rate are the run's ``grpo`` section's (``adam_*``, ``weight_decay``,
    ``max_grad_norm``, ``strategy``, ``max_pack_tokens``, ``trie_attention``, ``bf16_autocast``,
    ``checkpoint_every``, ``keep_checkpoints``); ``lora`` picks an adapter instead of full weights."""

    from_run: str | None = Field(None, min_length=1, max_length=200)
    """The run whose rollouts are the data (a training run, an eval, a collection run with a teacher)."""
    min_reward: float | None = Field(None, ge=-1e6, le=1e6)
    """With ``from_run``: only its rollouts rewarded at least this much; null = every rollout with calls."""
    where: str | None = Field(None, min_length=1, max_length=10_000)
    """A SQL condition over the ``trajectories`` view (``reward >= 1 AND harness = 'codeblock'``); the
    rollouts it selects are the data."""
    epochs: int = Field(1, ge=1, le=10_000)
    """Passes over the selection."""
    batch_rollouts: int = Field(8, ge=1, le=100_000)
    """Rollouts per optimizer step (the last batch of an epoch may be smaller); one version per step."""
    learning_rate: float = Field(1e-5, gt=0, le=1)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    """Seeds each epoch's shuffle of the rollouts (and torch, numpy in the learner)."""

    @model_validator(mode="after")
    def _one_selection(self) -> SFTSpec:
        if problem := selection_problem(self.from_run, self.min_reward, self.where):
            raise ValueError(problem)
        return self


class SFTConfig(SFTSpec):
    """An SFT run's stored section (``RunConfig.sft``): the user's ``SFTSpec`` and the selection the api resolved."""

    rollout_ids: list[str] = Field(min_length=1, max_length=1_000_000)
    """The selected rollouts (set by the api when it creates the run), in the order the selection gave them."""

    def steps_per_epoch(self) -> int:
        return -(-len(self.rollout_ids) // self.batch_rollouts)

    @property
    def steps(self) -> int:
        """Optimizer steps (= published versions) of the whole run."""
        return self.epochs * self.steps_per_epoch()


class InitFrom(_Section):
    """Start a training run from another run's published version (``RunSpec.init``; ``harnessrl run create --init
    RUN[@VERSION]``): an SFT warm start, or a GRPO run continued. The learner loads that version's full weights
    (checked against its ``weights`` row's sha256) instead of the model directory's, and the inference pool serves
    them as the new run's version 0 (``services/inference/updater.py``). Only full weights: a LoRA run trains an
    adapter on the served base weights, so neither it nor a LoRA version can be an init."""

    run_id: str = Field(min_length=1, max_length=200)
    version: int | None = Field(None, ge=0, le=1_000_000)
    """null = the run's newest version when the run is created; the api stores the number it resolved."""

    def __str__(self) -> str:
        return f"{self.run_id}@{self.version}"


WITHHELD_ISSUE = "Fix the bug in this repository so that its tests pass."
"""What the agent is told instead of the task's problem statement when a run's ``issue`` is ``withheld``."""

IssueShown = Literal["shown", "withheld"]


class RunSpec(_Section):
    """What a user chooses for a run (every field is settable through ``POST /v1/runs`` by this name)."""

    model: str = Field(min_length=1, max_length=500)
    """Served model alias the harness asks for (the gateway samples from the run's policy whatever it says)."""
    harness: HarnessConfig
    """The harness and its options (``shared/harnesses.py``): ``{"name": "shell", "command": "..."}``, or a
    name alone for a harness without required options."""
    group_size: int = Field(4, ge=1, le=256)
    """Rollouts per task per step (the GRPO group)."""
    steps: int = Field(1, ge=1, le=MAX_STEPS)
    """Sampling steps; the learner trains once per step."""
    reward_fn: str = Field("resolved", pattern=NAME_PATTERN, max_length=100)
    """Reward function the grader applies (``services/grader/grade.py``: ``resolved``, ``fraction_passed``)."""
    sampling: SamplingConfig = SamplingConfig()
    limits: LimitsConfig = LimitsConfig()
    grpo: GRPOConfig = GRPOConfig()
    lora: LoraConfig | None = None
    """Train a LoRA adapter with these settings; null = full weights."""
    eval: EvalConfig = EvalConfig()
    """Evaluations of the run's own policy while it trains (none by default)."""
    teacher: TeacherConfig | None = None
    """Who answers the model calls instead of the policy (``TeacherConfig``); null = the policy. A teacher's calls
    are recorded with ``source = teacher`` and are never trained on by GRPO (they carry no logprobs)."""
    init: InitFrom | None = None
    """Start from another run's published version instead of the model directory's weights; null = the base."""
    issue: IssueShown = "shown"
    """What the agent is told: ``shown`` = each task's problem statement; ``withheld`` = one fixed line for every
    task (``WITHHELD_ISSUE``), a control: the pass@1 a policy keeps without the issue text is what it solves from
    the code alone (or from answers it learned by heart)."""

    def instruction(self, problem_statement: str) -> str:
        """What the runner hands the harness for a task with this problem statement."""
        return WITHHELD_ISSUE if self.issue == "withheld" else problem_statement


class RunConfig(RunSpec):
    """A run's stored configuration: the user's ``RunSpec`` plus what the api resolved when it created the run."""

    dataset: str = Field("", max_length=100)
    """Label of the run's tasks (a bundled suite name, or the request's ``dataset``)."""
    task_ids: list[str] = Field(default_factory=list)
    """The run's tasks (``tasks.id``), in the order steps walk them."""
    groups_per_step: int = Field(1, ge=1, le=10_000)
    """Groups (tasks) per sampling step; the learner trains on exactly this many groups per step."""
    model_dir: str | None = Field(None, min_length=1, max_length=4096)
    """Weights the learner starts from; null = ``Settings.model_dir`` (tests and benches set it)."""
    request_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    """Hash of the creating request (api: an ``Idempotency-Key`` replay must send the same body)."""
    target: EvalTarget | None = None
    """An eval run's target (``runs.kind = 'eval'``); null on a training run."""
    sft: SFTConfig | None = None
    """A supervised fine-tuning run's data and schedule (``runs.kind = 'sft'``); null on other runs."""


class RunConfigError(ValueError):
    """A stored run config that does not validate; the message names the run and every bad field."""


class _RunRow(Protocol):
    id: str
    config: dict[str, Any]


def read_run_config(run: _RunRow) -> RunConfig:
    """The run's config, validated (``RunConfigError`` when the stored row does not fit the model)."""
    try:
        return RunConfig.model_validate(run.config)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
            for err in exc.errors(include_url=False)
        )
        raise RunConfigError(f"run {run.id}: stored config is invalid: {problems}") from None
