"""The learning bench's arithmetic: Wilson 95% intervals, the reward rise (last three steps vs first three), the
estimate the demo prints."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.recipe import RECIPE, EvalResult, LearningResult
from shared.eval_stats import wilson_interval

pytestmark = pytest.mark.unit


def test_wilson_interval_matches_known_values() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(14, 72)
    assert (round(lo, 3), round(hi, 3)) == (0.120, 0.300)
    lo, hi = wilson_interval(0, 64)
    assert lo == 0.0 and 0.05 < hi < 0.06
    lo, hi = wilson_interval(64, 64)
    assert hi == 1.0 and 0.94 < lo < 0.95


def test_reward_rise_and_figures() -> None:
    before, after = EvalResult("a", 10, 72, [0], 60.0), EvalResult("b", 20, 72, [8], 60.0)
    result = LearningResult({}, "run", before, after, [0.1, 0.2, 0.0, 0.3, 0.4, 0.5, 0.4, 0.6], [], {}, 1.0)
    assert result.reward_rise == pytest.approx(0.5 - 0.1)
    figures = result.as_dict()
    assert figures["eval_rise_points"] == pytest.approx(100 * 10 / 72)
    assert figures["eval_after"]["interval_95"] == list(wilson_interval(20, 72))


def test_the_table_reports_answers_cut_by_max_tokens() -> None:
    from pathlib import Path

    from benchmarks.learning import table

    before, after = EvalResult("a", 10, 72, [0], 60.0, cut=9), EvalResult("b", 20, 72, [8], 60.0, cut=40)
    result = LearningResult(
        {}, "run", before, after, [0.1, 0.2], [], {"rollouts_s": 1, "grading_s": 1, "learner_s": 1,
        "swap_paused_s": 1}, 1.0, {"train_s": 1.0}, cut_per_step=[0.25, 0.5],
    )  # fmt: skip
    row = next(line for line in table(result, "m", "m", Path("x.png")).splitlines() if "cut by" in line)
    assert row == "| answers cut by max_tokens | training, per step: 25% 50%; eval 9/72 → 40/72 |"
    assert result.as_dict()["eval_after"]["cut"] == 40


def test_the_demo_estimate_follows_the_measured_runs_and_the_load() -> None:
    # attempt 36 (AVX-512, bf16 learner): 38 min; attempt 37 (AVX2 only, fp32 learner): 50 min, both 108 eval tasks
    assert 32 <= RECIPE.estimate_minutes(eval_tasks=108, load=1.0, native_bf16=True) <= 42
    assert 45 <= RECIPE.estimate_minutes(eval_tasks=108, load=1.0, native_bf16=False) <= 60
    assert RECIPE.estimate_minutes(eval_tasks=108, load=16.0, native_bf16=True) > RECIPE.estimate_minutes(
        eval_tasks=108, load=1.0, native_bf16=True
    )


def test_quick_only_demo_options_without_quick_are_a_usage_error() -> None:
    """``--steps`` and the other --quick shapes would be ignored by the learning demo: refused before anything
    starts, naming each one."""
    from click.testing import CliRunner

    from benchmarks.demo import demo

    result = CliRunner().invoke(demo, ["--steps", "2", "--tasks", "1"])
    assert result.exit_code == 2, result.output
    assert "--steps, --tasks shape the --quick run only" in result.output


def _arm(lag: int, wall_per_step: float, inference: float, passed: int) -> dict:  # type: ignore[type-arg]
    from benchmarks.recipe import wilson_interval

    def evaluation(n: int) -> dict:  # type: ignore[type-arg]
        return {"pass_at_1": n / 72, "interval_95": list(wilson_interval(n, 72)), "samples": 72}

    return {
        "train_run": f"run_lag{lag}", "reward_per_step": [0.1, 0.3], "eval_before": evaluation(8),
        "eval_after": evaluation(passed), "groups_stale": 0, "png": f"lag{lag}.png", "pinned_cpus": None,
        "machine_start": "quiet", "machine_end": "quiet",
        "timing": {"steps": 8, "wall_s": 8 * wall_per_step, "wall_s_per_step": wall_per_step,
                   "inference_busy_fraction": inference, "learner_busy_fraction": 0.3, "policy_lag_mean": lag / 2,
                   "policy_lag_max": lag},
    }  # fmt: skip


def test_the_lag_comparison_reports_the_step_time_ratio_and_the_eval_check() -> None:
    from benchmarks.learning import comparison, comparison_table

    arms = {0: _arm(0, 200.0, 0.40, 16), 1: _arm(1, 140.0, 0.62, 10)}
    verdict = comparison(arms)
    assert verdict["wall_s_per_step_ratio_lag1_over_lag0"] == pytest.approx(0.7)
    # 10/72 = 13.9% against lag 0's 16/72 = 22.2% (95% CI from 14.1%): below the interval.
    assert verdict["eval_after_lag1_within_or_above_lag0_interval"] is False
    assert comparison({0: arms[0], 1: _arm(1, 140.0, 0.62, 11)})[
        "eval_after_lag1_within_or_above_lag0_interval"
    ]
    text = comparison_table(arms, verdict)
    assert "| wall time per learner step (s) | 200.0 | 140.0 |" in text
    assert "| inference busy fraction | 40% | 62% |" in text
    assert "| policy lag of trained tokens, mean | 0.00 | 0.50 |" in text
    assert "| training reward per step | 0.10 0.30 | 0.10 0.30 |" in text
    assert "wall time per step, lag 1 / lag 0: 0.70" in text and "or above: no" in text

    unmeasured = {0: {**arms[0], "timing": None}, 1: arms[1]}
    assert comparison(unmeasured)["wall_s_per_step_ratio_lag1_over_lag0"] is None
    assert "| wall time per learner step (s) | - | 140.0 |" in comparison_table(
        unmeasured, comparison(unmeasured)
    )


def test_compare_lags_with_a_lag_of_its_own_is_a_usage_error() -> None:
    from click.testing import CliRunner

    from benchmarks.learning import bench_learning

    result = CliRunner().invoke(bench_learning, ["--compare-lags", "--max-policy-lag", "2"])
    assert result.exit_code == 2 and "leave out --max-policy-lag" in result.output, result.output


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        ("kl_coef=-1", "kl_coef: Input should be greater than or equal to 0"),
        ("bogus=1", "bogus: Extra inputs are not permitted"),
        ("learning_rate=1e-4", "learning_rate: set with its own option"),
        ("normalize_std", "expected KEY=VALUE"),
    ],
)
def test_a_bad_grpo_setting_is_a_usage_error_before_anything_starts(pair: str, says: str) -> None:
    from click.testing import CliRunner

    from benchmarks.learning import bench_learning

    result = CliRunner().invoke(bench_learning, ["--grpo", pair])
    assert result.exit_code == 2 and says in result.output, result.output


@pytest.mark.parametrize(("flag", "sent"), [([], "auto"), (["--bf16-autocast", "false"], False)])
def test_the_recipe_autocasts_where_the_cpu_computes_bf16_natively(flag: list[str], sent: object) -> None:
    """The recipe leaves bf16 to the learner's CPU (``auto``); ``--bf16-autocast`` sets it for the training run."""
    from dataclasses import replace

    from click.testing import CliRunner

    from benchmarks.learning import bench_learning
    from benchmarks.recipe import training_run_body
    from services.api.schemas import RunCreate

    ctx = bench_learning.make_context("learning", flag)
    recipe = replace(
        RECIPE, **{k: v for k, v in ctx.params.items() if k == "bf16_autocast" and v is not None}
    )
    body = RunCreate.model_validate_json(json.dumps(training_run_body(recipe, "policy", ["factorial-1"])))
    assert body.grpo.bf16_autocast == sent
    refused = CliRunner().invoke(bench_learning, ["--bf16-autocast", "fast"])
    assert refused.exit_code == 2 and "'fast' is not one of 'auto', 'true', 'false'" in refused.output


def test_grpo_settings_reach_the_training_runs_config() -> None:
    from dataclasses import replace

    from benchmarks.recipe import training_run_body
    from services.api.schemas import RunCreate

    recipe = replace(RECIPE, grpo={"kl_coef": 0.05, "normalize_std": True}, holdout="bugs")
    # The body as the api parses it (JSON in, the route's schema).
    body = RunCreate.model_validate_json(json.dumps(training_run_body(recipe, "policy", ["factorial-1"])))
    assert body.grpo.kl_coef == 0.05 and body.grpo.normalize_std is True
    assert body.grpo.learning_rate == recipe.learning_rate and body.grpo.max_policy_lag == 1
    assert body.split == "seen_train" and body.harness.name == "codeblock"


def test_the_demo_reward_table_shows_each_learner_steps_dtype() -> None:
    """A sampling step's row carries the learner step that trained on it (steps row ``step`` = sampling step + 1),
    with the dtype that step computed in; a step without a learner row shows dashes."""
    from rich.console import Console

    from benchmarks.demo import reward_table

    before = after = EvalResult("a", 1, 8, [0], 1.0)
    steps = [
        {"step": 1, "loss": 0.5, "groups_trained": 3, "step_time_s": 41.0, "compute_dtype": "bfloat16"},
        {"step": 2, "loss": -0.25, "groups_trained": 0, "step_time_s": 4.0, "compute_dtype": "float32"},
    ]
    result = LearningResult({}, "run", before, after, [0.25, 0.5, 0.75], steps, {}, 1.0)
    console = Console(width=120, record=True)
    console.print(reward_table(result))
    rows = [
        re.split("[│┃]", line)[1:-1]
        for line in console.export_text().splitlines()
        if line.startswith(("│", "┃"))
    ]
    cells = [[c.strip() for c in row] for row in rows]
    assert cells[0] == ["step", "reward", "loss", "groups trained", "step s", "dtype"]
    assert cells[1:] == [
        ["0", "0.25", "0.5000", "3", "41", "bfloat16"],
        ["1", "0.50", "-0.2500", "0", "4", "float32"],
        ["2", "0.75", "-", "-", "-", "-"],
    ]
