"""``harnessrl bench learning --harness mini-swe-agent`` (``benchmarks/agent.py``): what counts as a well-formed
reply, the options it refuses, and its table."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from benchmarks.agent import (
    ACTION,
    AGENT_HARNESSES,
    AGENT_RECIPE,
    agent_table,
    is_action,
    text_actions,
    throughput_figures,
)
from benchmarks.learning import bench_learning

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("reply", "well_formed"),
    [
        ("THOUGHT: look first.\n\n```mswea_bash_command\nls\n```", True),
        ("THOUGHT: write it.\n\n```mswea_bash_command\ncat <<'EOF' > a.py\nx = 1\nEOF\n```\n", True),
        ("```mswea_bash_command\nls\n```\n```mswea_bash_command\npwd\n```", False),  # two actions
        ("```bash\nls\n```", False),  # another fence: mini-swe-agent rejects it
        ("I would run ls.", False),
        ("```mswea_bash_command\nls", False),  # cut before the fence closed
    ],
)
def test_a_reply_is_well_formed_when_mini_swe_agent_finds_exactly_one_action(
    reply: str, well_formed: bool
) -> None:
    assert (len(ACTION.findall(reply)) == 1) is well_formed


def test_the_agent_recipe_drives_mini_swe_agent_text_based_without_the_codeblock_curriculum() -> None:
    rl = AGENT_RECIPE.rl
    assert rl.harness == {"name": "mini-swe-agent", "config": "mini_textbased", "step_limit": 8}
    assert rl.curriculum is None and rl.holdout == "families" and rl.init is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--harness", "mini-swe-agent", "--seeds", "0,1"], "--seeds: not with --harness mini-swe-agent"),
        (["--harness", "mini-swe-agent", "--holdout", "bugs"], "--holdout: not with"),
        (["--harness", "mini-swe-agent", "--compare-lags"], "--compare-lags: not with"),
        (["--demo-tasks", "8"], "--demo-tasks: only with --harness mini-swe-agent"),
        (["--no-base-eval"], "--base-eval: only with --harness mini-swe-agent"),
        (["--harness", "claude-code-bare", "--seeds", "0,1"], "--seeds: not with --harness claude-code-bare"),
        (["--harness", "mini-swe-agent", "--demo-tasks", "0"], "0 is not in the range"),
    ],
)
def test_options_the_agent_path_cannot_honour_are_usage_errors(args: list[str], says: str) -> None:
    result = CliRunner().invoke(bench_learning, args)
    assert result.exit_code == 2 and says in result.output, result.output


def _eval(passed: int, samples: int) -> dict[str, Any]:
    return {"run": "ev", "passed": passed, "samples": samples, "pass_at_1": passed / samples,
            "interval_95": [0.0, 0.2], "wall_s": 60.0}  # fmt: skip


def test_the_table_gives_each_stage_its_pass_rate_turns_and_wall_time() -> None:
    turns = {"well_formed_share": 0.85, "replies": 400, "calls_per_rollout": {"median": 5.0, "mean": 4.6},
             "prompt_tokens_per_rollout": {"mean": 9000.0}, "completion_tokens_per_rollout": {"mean": 400.0},
             "chains_per_rollout": {"mean": 1.0}, "forks_per_rollout": {"mean": 0.0},
             "outcomes": {"Submitted": 90, "step limit of 8 reached": 18}}  # fmt: skip
    figures = {
        "machine_start": "cpu A", "machine_end": "cpu A", "stage_wall_s": {"eval_sft_s": 600.0, "sft_s": 1200.0},
        "evals": {"base": _eval(0, 108), "sft": _eval(9, 108)},
        "turns": {"eval_base": turns | {"well_formed_share": 0.02}, "eval_sft": turns},
        "sft_steps": [{"loss": 1.5, "tokens_computed": 9000.0, "tokens_lower_bound": 9000.0},
                      {"loss": 0.4, "tokens_computed": 9500.0, "tokens_lower_bound": 9000.0}], "sft_run": "sft_1", "reward_per_step": [], "train_run": None,
        "paired": {"base_to_sft": {"delta": 0.083, "interval_95": [0.03, 0.14], "mcnemar_p": 0.004, "pairs": 108}},
        "total_wall_s": 3600.0,
    }  # fmt: skip
    table = agent_table(figures)
    assert "| sft | 8.3% (9/108; 0%-20%) | 85% of 400 | 5.0 | 9,000 / 400 | 1.00 / 0.00 | 10.0 min |" in table
    assert "| base | 0.0% (0/108" in table and "2% of 400" in table
    assert "SFT (sft_1): 2 steps, loss 1.500 -> 0.400, 20.0 min" in table
    assert "paired base to sft: delta +8.3 points, 95 % +3.0 to +14.0 (McNemar p 0.004, 108 pairs)" in table
    assert "SFT learner tokens computed 18,500 against a lower bound of 18,000 (1.03x)" in table
    assert "eval_sft: rollouts ended — Submitted: 90, step limit of 8 reached: 18" in table


def test_the_grpo_stage_asks_for_a_run_through_the_agent_from_the_sft_version() -> None:
    """The body ``train`` posts for stage 4 validates as a ``POST /v1/runs`` body: mini-swe-agent with its options,
    ``init`` the SFT run (its newest version), seeded sampling."""
    from dataclasses import replace

    from benchmarks.recipe import training_run_body
    from services.api.schemas import RunCreate

    rl = replace(AGENT_RECIPE.rl, init="sft_abc")
    body = RunCreate.model_validate(training_run_body(rl, "small", ["clamp-1", "clamp-2"]))
    assert body.harness.name == "mini-swe-agent" and body.harness.step_limit == 8  # type: ignore[union-attr]
    assert body.init is not None and body.init.run_id == "sft_abc" and body.init.version is None
    assert body.sampling.max_tokens == 384 and body.sampling.seed is not None
    assert body.group_size == 4 and body.groups_per_step == 4 and body.steps == 8


def test_without_the_base_eval_the_table_has_no_base_row_and_no_base_pair() -> None:
    turns = {"well_formed_share": 1.0, "replies": 540, "calls_per_rollout": {"median": 5.0},
             "prompt_tokens_per_rollout": {"mean": 9000.0}, "completion_tokens_per_rollout": {"mean": 400.0},
             "chains_per_rollout": {"mean": 1.0}, "forks_per_rollout": {"mean": 0.0}, "outcomes": {"submitted": 108}}  # fmt: skip
    figures = {
        "machine_start": "cpu A", "machine_end": "cpu A", "stage_wall_s": {"eval_sft_s": 600.0, "eval_rl_s": 600.0},
        "evals": {"sft": _eval(24, 108), "rl": _eval(30, 108)}, "turns": {"eval_sft": turns, "eval_rl": turns},
        "sft_steps": [], "sft_run": "sft_1", "reward_per_step": [0.25, 0.5], "train_run": "run_1",
        "paired": {"sft_to_rl": {"delta": 0.056, "interval_95": [0.0, 0.11], "mcnemar_p": 0.05, "pairs": 108}},
        "total_wall_s": 3600.0,
        "grpo_timing": {"inference_busy_fraction": 0.9, "learner_busy_fraction": 0.35, "wall_s": 1200.0, "steps": 4,
                        "wall_s_per_step": 300.0, "policy_lag_mean": 0.5},
    }  # fmt: skip
    table = agent_table(figures)
    assert "GRPO time: inference busy 90%, learner busy 35% of 20.0 min over 4 steps (300 s a step)" in table
    assert "| base |" not in table and "paired base to sft" not in table
    assert "| rl | 27.8% (30/108" in table
    assert "paired sft to rl: delta +5.6 points" in table
    assert "GRPO (run_1) training reward per step: 0.25, 0.50" in table


def test_the_loops_sampling_rate_is_set_beside_the_engines_own() -> None:
    """16 rollouts of 500 sampled tokens in a 400 s run whose inference was busy half the time: 20 tokens/s over
    the wall, 40 while busy, a fifth of an engine that samples 100 tokens/s at the same concurrency."""
    turns = {"rollouts": 16, "completion_tokens_per_rollout": {"median": 480.0, "mean": 500.0}}
    timing = {"wall_s": 400.0, "inference_busy_fraction": 0.5}
    speed = throughput_figures(turns, timing, {"concurrency": 12, "tokens_per_s": 100.0})
    assert speed["loop_sampled_tokens"] == 8000.0
    assert speed["loop_tokens_per_s"] == 20.0 and speed["loop_tokens_per_inference_busy_s"] == 40.0
    assert speed["loop_over_engine"] == 0.2 and speed["engine_concurrency"] == 12
    table = agent_table(
        {"machine_start": "a", "machine_end": "a", "stage_wall_s": {}, "evals": {}, "turns": {}, "sft_steps": [],
         "sft_run": "s", "paired": {}, "reward_per_step": [], "total_wall_s": 1.0, "throughput": speed}
    )  # fmt: skip
    assert (
        "GRPO sampled 20 tokens/s over its wall time (40 while inference was busy); vLLM's own at concurrency 12: "
        "100 tokens/s (the loop 20% of it)" in table
    )


def test_an_action_is_a_fenced_block_for_mini_swe_agent_and_a_parsed_tool_call_for_claude_code() -> None:
    assert text_actions(AGENT_HARNESSES["mini-swe-agent"])
    assert not text_actions({"name": "mini-swe-agent", "config": "mini"})
    assert not text_actions(AGENT_HARNESSES["claude-code-bare"])
    block = "THOUGHT: look\n\n```mswea_bash_command\nls\n```"
    assert is_action({"tool_call_count": 0, "parse_error": None}, block, textual=True)
    assert not is_action({"tool_call_count": 0, "parse_error": None}, block, textual=False)
    assert is_action({"tool_call_count": 1, "parse_error": None}, "", textual=False)
    assert not is_action({"tool_call_count": 0, "parse_error": "bad JSON"}, "<tool_call>{", textual=False)


def test_the_claude_code_rung_asks_for_bare_claude_with_a_turn_budget() -> None:
    from dataclasses import replace

    from benchmarks.recipe import training_run_body
    from services.api.schemas import RunCreate

    rl = replace(AGENT_RECIPE.rl, harness=AGENT_HARNESSES["claude-code-bare"], init="sft_abc")
    body = RunCreate.model_validate(training_run_body(rl, "small", ["clamp-1"]))
    assert body.harness.name == "claude-code" and body.harness.bare  # type: ignore[union-attr]
    assert body.harness.max_turns == 8  # type: ignore[union-attr]
