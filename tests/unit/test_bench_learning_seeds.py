"""``harnessrl bench learning --seeds`` / ``--pool``: the per-seed records pool into one report (paired Δ per seed
and pooled, mean ± sd across seeds, reward rise, curves per seed and their mean, wall time), written as one JSON
object, a PNG and a TensorBoard folder; bad combinations and files are usage errors before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from benchmarks.learning import bench_learning
from benchmarks.learning_seeds import PAIRS_KEY, keep_record, report, report_table
from benchmarks.recipe import RECIPE
from shared.paired_stats import Pair, compare, compare_pooled
from shared.tensorboard import read_scalars

pytestmark = pytest.mark.unit

FF, FT, TF, TT = (False, False), (False, True), (True, False), (True, True)


def record(seed: int, pairs: dict[str, list[Pair]], rewards: list[float], wall_s: float) -> dict[str, Any]:
    """A seed's record as ``bench_learning.arm`` writes it (the fields the report reads)."""
    return {
        "seed": seed, "train_run": f"run_{seed}", "reward_per_step": rewards, "total_wall_s": wall_s,
        "reward_rise_last3_vs_first3": sum(rewards[-3:]) / 3 - sum(rewards[:3]) / 3,
        "paired": {PAIRS_KEY: {t: [list(p) for p in ps] for t, ps in pairs.items()}, **compare(pairs).as_dict()},
    }  # fmt: skip


SEED_PAIRS = {
    0: {f"t{i}": [FT, FF, TT] for i in range(6)},  # +1 of 3 on every task
    1: {f"t{i}": [FT, FT, FF] if i < 3 else [TF, FF, FF] for i in range(6)},  # +6 -3 over 18
    2: {f"t{i}": [FF, FF, FF] for i in range(6)},  # no change
}
REWARDS = {
    0: [0.1, 0.2, 0.1, 0.3, 0.4, 0.5],
    1: [0.2, 0.2, 0.2, 0.3, 0.3, 0.4, 0.9],
    2: [0.0, 0.1, 0.0, 0.1, 0.0, 0.1],
}


def records() -> list[dict[str, Any]]:
    return [record(s, SEED_PAIRS[s], REWARDS[s], 60.0 * (s + 1)) for s in (2, 0, 1)]


def test_the_report_pools_per_task_and_spreads_across_seeds() -> None:
    figures = report(records())
    assert [s["seed"] for s in figures["per_seed"]] == [0, 1, 2]
    assert [s["delta"] for s in figures["per_seed"]] == [pytest.approx(1 / 3), pytest.approx(3 / 18), 0.0]
    pooled = compare_pooled([SEED_PAIRS[s] for s in (0, 1, 2)])
    assert figures["pooled"]["delta"] == pytest.approx((6 + 3 + 0) / 54) == pooled.delta
    assert figures["pooled"]["interval_95"] == list(pooled.interval_95)
    assert figures["pooled"]["tasks"] == 6 and figures["pooled"]["pairs"] == 54
    spread = figures["across_seeds"]
    assert spread["seeds"] == 3 and spread["delta_mean"] == pytest.approx((1 / 3 + 1 / 6) / 3)
    assert spread["delta_sd"] == pytest.approx(0.16666666, abs=1e-6)  # sd of 1/3, 1/6, 0
    assert figures["per_seed"][0]["reward_rise_last3_vs_first3"] == pytest.approx(0.4 - 0.4 / 3)
    assert figures["curves"]["reward_per_step"]["1"] == REWARDS[1]
    # the mean over seeds by step, over the 6 steps every seed has
    assert figures["curves"]["reward_per_step_mean"] == pytest.approx(
        [sum(REWARDS[s][i] for s in (0, 1, 2)) / 3 for i in range(6)]
    )
    assert figures["wall_s"] == {"per_seed": {"0": 60.0, "1": 120.0, "2": 180.0}, "total": 360.0}
    text = report_table(figures)
    assert "| 2 | 0.0% → 0.0% | +0.0 | +0.0 to +0.0 (within noise) |" in text
    assert "Δ across seeds: mean +16.7 ± sd 16.7 points" in text
    assert "wall time: 6.0 min in total" in text


def _invoke(args: list[str], data_dir: Path) -> Any:
    return CliRunner().invoke(bench_learning, args, env={"HARNESSRL_DATA_DIR": str(data_dir)})


def test_pool_reads_earlier_outputs_and_writes_json_png_and_tensorboard(tmp_path: Path) -> None:
    one, two = records()[:1], records()[1:]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(report(one)))  # a --seeds 2 --json output
    second.write_text(json.dumps(report(two)["seeds"][0] | {}))  # a one-run --json object (seed 0)
    third = tmp_path / "c.json"
    third.write_text(json.dumps(report(two[1:])))  # seed 1
    out = tmp_path / "pooled.png"
    result = _invoke(["--pool", str(first), str(second), str(third), "--json", "--out", str(out)], tmp_path)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)  # one JSON object
    assert figures["pooled"] == report(records())["pooled"]
    assert figures["png"] == str(out) and out.stat().st_size > 0
    scalars = read_scalars(Path(figures["tensorboard"]))
    assert [v for _, v in scalars["train/reward_seed_1"]] == pytest.approx(REWARDS[1])
    assert len(scalars["train/reward_mean_of_seeds"]) == 6
    assert [step for step, _ in scalars["eval/pass_at_1_seed_1"]] == [0, 7]


def test_pool_reads_a_json_lines_file_of_seed_records_kept_over_several_sittings(tmp_path: Path) -> None:
    kept = tmp_path / "seeds.jsonl"
    kept.write_text("".join(json.dumps(r) + "\n" for r in records()[:2]) + "\n")  # seeds 0-1, a blank line
    later = tmp_path / "seed2.json"
    later.write_text(json.dumps(report(records()[2:])))  # seed 2, run in a later sitting
    result = _invoke(["--pool", str(kept), str(later), "--json"], tmp_path)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    assert figures["pooled"] == report(records())["pooled"]
    assert [s["seed"] for s in figures["per_seed"]] == [0, 1, 2]


def test_the_seeds_a_stopped_run_finished_are_kept_as_they_finish_and_pool(tmp_path: Path) -> None:
    # ``--seeds`` appends each finished seed's record (with the bench's own keys beside the report's) before the
    # next seed starts; a run stopped in seed 2 leaves seeds 0-1 for ``--pool``.
    kept = tmp_path / "bench" / "learning-seeds-x.jsonl"
    for r in records()[1:]:
        keep_record(kept, r | {"stages_s": {"rollouts_s": 1.5}, "train_run_dir": tmp_path})
    assert [json.loads(line)["seed"] for line in kept.read_text().splitlines()] == [0, 1]
    result = _invoke(["--pool", str(kept), "--json"], tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["pooled"] == report(records()[1:])["pooled"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--seeds", "0,x"], "expected seeds like 0,1,2"),
        (["--seeds", "1,1"], "distinct seeds"),
        (["--seeds", "0,1", "--seed", "3"], "leave out --seed"),
        (["--pool"], "name the JSON files to pool"),
        (["--pool", "--seeds", "0", "FILE"], "--pool runs nothing: drop --seeds"),
        (["--pool", "--steps", "3", "FILE"], "drop --steps"),
        (["FILE"], "add --pool"),
        (["--pool", "BAD"], "not the --json output"),
        (["--pool", "FILE", "FILE"], "seed 0 is in more than one record"),
        (["--pool", "LINES"], "not JSON"),
    ],
)
def test_bad_seed_and_pool_arguments_are_usage_errors(tmp_path: Path, args: list[str], says: str) -> None:
    good, bad, lines = tmp_path / "good.json", tmp_path / "bad.json", tmp_path / "seeds.jsonl"
    good.write_text(json.dumps(report(records()[1:2])))
    bad.write_text(json.dumps({"arms": {}}))
    lines.write_text(json.dumps(records()[0]) + "\n{not json\n")
    args = [{"FILE": str(good), "BAD": str(bad), "LINES": str(lines)}.get(a, a) for a in args]
    result = _invoke(args, tmp_path)
    assert result.exit_code == 2 and says in result.output, result.output
    assert not (tmp_path / "tensorboard").exists()


def test_the_demo_says_what_the_split_is_and_when_its_figure_is_within_noise() -> None:
    from benchmarks.demo import paired_lines, split_line

    assert split_line("families", 60).startswith(
        "held-out functions: the 60 eval tasks are bugs in functions never"
    )
    assert "seen functions" in split_line("bugs", 16)
    noisy = paired_lines(compare({"a": [FT], "b": [FF], "c": [TT]}).as_dict())
    assert "Δ pass@1 [bold]+33.3[/] points (95% CI +0.0 to +100.0" in noisy[0]
    assert len(noisy) == 2 and noisy[1].startswith("[yellow]within noise:[/] the interval includes 0")
    clear = paired_lines(compare({f"t{i}": [FT, FT] for i in range(8)}).as_dict())
    assert len(clear) == 1 and "(95% CI +100.0 to +100.0" in clear[0]


def test_the_reference_control_counts_answers_equal_to_a_training_reference() -> None:
    from benchmarks.learning_seeds import reference_matches
    from benchmarks.recipe import DATASET
    from shared.datasets import load_dataset, reference_patch

    train = load_dataset(DATASET, RECIPE.splits[0])
    memorized = (
        train[0].instance_id,
        reference_patch(DATASET, train[0].instance_id),
    )  # a training answer again
    broken = (train[1].instance_id, "--- a/x.py\n+++ b/x.py\n@@ -1,1 +1,1 @@\n-not in the file\n+y = 1\n")
    empty = (train[2].instance_id, "")
    figures = reference_matches(RECIPE, [memorized, broken, empty])
    assert (figures["answers"], figures["equal_to_training_reference"], figures["unreadable_patches"]) == (
        3,
        1,
        1,
    )
    assert figures["share"] == pytest.approx(1 / 3) and figures["training_references"] > 0


def test_the_report_carries_each_seeds_controls() -> None:
    seeds = records()
    seeds[0]["controls"] = {
        "reference_answers": {"share": 0.0125, "answers": 80, "equal_to_training_reference": 1,
                              "unreadable_patches": 0, "training_references": 40},
        "issue_withheld": {"pass_at_1": 0.05, "passed": 4, "samples": 80, "interval_95": [0.02, 0.12]},
    }  # fmt: skip
    figures = report(seeds)
    by_seed = {s["seed"]: s for s in figures["per_seed"]}
    assert (by_seed[2]["reference_answer_share"], by_seed[2]["pass_at_1_issue_withheld"]) == (0.0125, 0.05)
    assert by_seed[0]["reference_answer_share"] is None
    assert "| 1.2% | 5.0% |" in report_table(figures)


def test_a_seed_trained_on_another_reward_also_reports_its_resolved_share_rise() -> None:
    seeds = records()
    seeds[1] |= {"recipe": {**RECIPE.__dict__, "reward_fn": "resolved_partial"},
                 "resolved_per_step": [0.0, 0.1, 0.0, 0.2, 0.2, 0.3]}  # fmt: skip
    figures = report(seeds)
    by_seed = {s["seed"]: s for s in figures["per_seed"]}
    assert by_seed[0]["reward_fn"] == "resolved_partial"
    assert by_seed[0]["resolved_rise_last3_vs_first3"] == pytest.approx(0.7 / 3 - 0.1 / 3)
    assert by_seed[1]["reward_fn"] == "resolved"  # its resolved share is its reward
    assert by_seed[1]["resolved_rise_last3_vs_first3"] == by_seed[1]["reward_rise_last3_vs_first3"]
    table = report_table(figures)
    assert "(resolved_partial; resolved +0.200)" in table and table.count("resolved_partial") == 1


def test_a_curriculum_that_cannot_fill_a_step_fails_before_anything_runs(tmp_path: Path) -> None:
    from shared.datasets import dataset_splits
    from shared.solve_rates import SolveRates

    train = dataset_splits("swe_micro")["train"]
    rates = tmp_path / "rates.json"
    SolveRates("swe_micro", "codeblock", "base", 8, {}, {t: (0, 8) for t in train}).write(rates)
    result = CliRunner().invoke(
        bench_learning, ["--curriculum", "0.1,0.6", "--solve-rates", str(rates)],
        env={"HARNESSRL_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/unreachable"},
    )  # fmt: skip
    assert result.exit_code == 1
    assert "curriculum: 0 train tasks have a base solve rate in [0.1, 0.6]" in result.output


def test_the_recipe_trains_on_its_curriculum_unless_told_otherwise() -> None:
    from benchmarks.learning import recipe_from_options
    from benchmarks.recipe import curriculum_tasks
    from shared.datasets import dataset_splits

    train = dataset_splits("swe_micro")["train"]
    by_default = recipe_from_options({"curriculum": None, "holdout": None}, {})
    assert by_default.curriculum == RECIPE.curriculum == (0.125, 0.625)
    chosen = curriculum_tasks(by_default, list(train))
    assert RECIPE.train_tasks <= len(chosen) < len(train)
    assert recipe_from_options({"curriculum": (0.0, 0.5), "holdout": None}, {}).curriculum == (0.0, 0.5)
    assert recipe_from_options({"curriculum": "none", "holdout": None}, {}).curriculum is None
    # The bundled rates cover the families split only: the seen-functions diagnostic trains on every task,
    # unless a band (and a rates file that covers it) is named.
    assert recipe_from_options({"curriculum": None, "holdout": "bugs"}, {}).curriculum is None
    assert recipe_from_options({"curriculum": (0.1, 0.6), "holdout": "bugs"}, {}).curriculum == (0.1, 0.6)


def test_curriculum_none_is_an_accepted_band_and_a_bad_one_is_a_usage_error() -> None:
    result = CliRunner().invoke(bench_learning, ["--curriculum", "0.7,0.2"])
    assert result.exit_code == 2 and "need 0 <= LOW <= HIGH <= 1" in result.output
    result = CliRunner().invoke(bench_learning, ["--curriculum", "some"])
    assert result.exit_code == 2 and "two numbers LOW,HIGH" in result.output
