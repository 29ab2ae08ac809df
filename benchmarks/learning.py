"""``harnessrl bench learning``: does the product make a real model better? A seeded run of the demo's training
(SmolLM2-135M-Instruct, ``swe_micro/train``, ``codeblock`` harness) with eval pass@1 on the held-out
``swe_micro/eval`` split before and after, through every real service (``benchmarks/recipe.py``).

Reports the training-reward curve, eval pass@1 before/after with 95% intervals, steps, wall time and time per
stage (rollouts, grading, learner step, weight swap), the wall time per learner step with the inference and
learner busy fractions and the policy lag of the trained tokens (``services/cli/step_figures.py``), the machine
and its load; ``--json`` prints one object. Every recipe field can be overridden (``--steps``,
``--learning-rate``, ``--max-policy-lag``, ...) to measure another setting.

``--compare-lags`` measures sampling ahead of the learner: the same recipe (same seed, same steps) at
``max_policy_lag`` 0 and then 1, each in a suite of its own started afresh (so each trains from the base weights
and its evals sample its own versions), reported side by side with the ratio lag 1 / lag 0 of the wall time per
step. ``HARNESSRL_PIN_CPUS=true`` runs both with inference and the learner on separate cores
(docs/perf.md#sampling-ahead-of-the-learner).

Every run reports the paired change: version 0 and the last version are evaluated with the same eval seed (derived
from the run seed), so their samples pair up (``paired``: Δ pass@1, per-task cluster bootstrap interval, McNemar;
``shared/paired_stats.py``). ``--seeds 0,1,2`` runs the recipe once per seed, each in a suite of its own, and
reports per seed and pooled (``benchmarks/learning_seeds.py``): Δ with its paired interval and McNemar per seed,
the pooled interval, the mean ± sd of Δ across seeds, each seed's training reward last 3 − first 3, the reward
curves per seed and their mean (PNG, TensorBoard, ``--json``) and the wall time per seed and in total. Seeds can
run one per invocation (``--seeds 1 --json > s1.json``) and be pooled afterwards without running anything:
``--pool s0.json s1.json s2.json``.
"""

from __future__ import annotations

import json
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import click

from benchmarks.learning_seeds import (
    keep_record,
    paired_figures,
    plot_seeds,
    reference_share,
    report,
    report_table,
    write_tensorboard,
)
from services.cli.step_figures import StepFigures, step_figures
from shared.machine import describe_machine

COMPARED_LAGS = (0, 1)


def _timing_rows(figures: StepFigures | None) -> list[str]:
    if figures is None:
        return ["| time per step | not measured (the steps rows carry no window) |"]
    return [
        f"| wall time per learner step | {figures.wall_s_per_step:.1f} s ({figures.steps} steps, "
        f"{figures.wall_s / 60:.1f} min of training) |",
        f"| busy fraction, inference / learner | {figures.inference_busy_fraction:.0%} / "
        f"{figures.learner_busy_fraction:.0%} |",
        f"| policy lag of trained tokens, mean / max | {figures.policy_lag_mean:.2f} / {figures.policy_lag_max} |",
    ]


def table(
    result: Any, machine_start: str, machine_end: str, png: Path, figures: StepFigures | None = None,
    paired: dict[str, Any] | None = None,
) -> str:  # fmt: skip
    b, a = result.eval_before, result.eval_after
    lines = [
        f"learning bench — start: {machine_start}; end: {machine_end}",
        "",
        "| measure | value |",
        "|---|---|",
        "| training reward per step | " + " ".join(f"{r:.2f}" for r in result.reward_per_step) + " |",
        f"| mean reward, last 3 steps − first 3 | {result.reward_rise:+.3f} |",
        *(
            ["| resolved share per step | " + " ".join(f"{r:.2f}" for r in result.resolved_per_step) + " |"]
            if result.recipe.get("reward_fn", "resolved") != "resolved"
            else []
        ),
        f"| eval pass@1, version 0 ({b.samples} samples) | {b.pass_at_1:.1%} (95% CI {b.interval[0]:.1%}–"
        f"{b.interval[1]:.1%}); versions sampled {b.policy_versions} |",
        f"| eval pass@1, last version ({a.samples} samples) | {a.pass_at_1:.1%} (95% CI {a.interval[0]:.1%}–"
        f"{a.interval[1]:.1%}); versions sampled {a.policy_versions} |",
        f"| eval change | {100 * (a.pass_at_1 - b.pass_at_1):+.1f} points{_paired_cell(paired)} |",
        "| answers cut by max_tokens | training, per step: "
        + " ".join(f"{c:.0%}" for c in result.cut_per_step)
        + f"; eval {b.cut}/{b.samples} → {a.cut}/{a.samples} |",
        f"| steps | {len(result.steps)} learner steps, {sum(s['groups_trained'] for s in result.steps)} groups "
        f"trained, {sum(s['groups_zero_variance'] for s in result.steps)} without reward variance |",
        f"| learner compute dtype | {', '.join(compute_dtypes(result.steps)) or 'no step trained'} |",
        f"| wall time | {result.wall_s / 60:.1f} min (eval before {b.wall_s / 60:.1f}, training "
        f"{result.stage_wall_s['train_s'] / 60:.1f}, eval after {a.wall_s / 60:.1f}) |",
    ]
    st = result.stages_s
    lines.append(
        f"| training time per stage (summed over rollouts/steps) | rollouts {st['rollouts_s']:.0f} s, grading "
        f"{st['grading_s']:.0f} s, learner steps {st['learner_s']:.0f} s, weight swap (generation paused) "
        f"{st['swap_paused_s']:.1f} s |"
    )
    lines += _timing_rows(figures)
    lines.append(f"| PNG | {png} |")
    return "\n".join(lines)


def _paired_cell(paired: dict[str, Any] | None) -> str:
    if paired is None:
        return ""
    lo, hi = paired["interval_95"]
    noise = "; within noise: the interval includes 0" if paired["within_noise"] else ""
    return (
        f" (paired: Δ {100 * paired['delta']:+.1f}, 95% CI {100 * lo:+.1f} to {100 * hi:+.1f} by per-task "
        f"cluster bootstrap; McNemar p {paired['mcnemar_p']:.3g}{noise})"
    )


def compute_dtypes(steps: list[dict[str, Any]]) -> list[str]:
    """The dtypes the learner computed the run's trained steps in (``metrics.compute_dtype`` of its steps rows)."""
    return sorted({s["compute_dtype"] for s in steps if s.get("compute_dtype")})


def comparison(arms: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """What the lag comparison concludes from its arms' figures (``arm`` below): the ratio lag 1 / lag 0 of the
    wall time per step, and whether lag 1's eval pass@1 after training is within lag 0's 95% interval or above."""
    slow, fast = (arms[lag] for lag in COMPARED_LAGS)
    out: dict[str, Any] = {"wall_s_per_step_ratio_lag1_over_lag0": None}
    if slow["timing"] and fast["timing"]:
        out["wall_s_per_step_ratio_lag1_over_lag0"] = (
            fast["timing"]["wall_s_per_step"] / slow["timing"]["wall_s_per_step"]
        )
    out["eval_after_lag1_within_or_above_lag0_interval"] = (
        fast["eval_after"]["pass_at_1"] >= slow["eval_after"]["interval_95"][0]
    )
    return out


def comparison_table(arms: dict[int, dict[str, Any]], verdict: dict[str, Any]) -> str:
    """One table, a column per lag."""

    def cells(fmt: Any) -> str:
        return " | ".join(fmt(arms[lag]) for lag in COMPARED_LAGS)

    def timing(key: str, spec: str) -> Any:
        return lambda a: "-" if a["timing"] is None else format(a["timing"][key], spec)

    def evaluation(name: str) -> Any:
        def fmt(a: dict[str, Any]) -> str:
            e = a[name]
            lo, hi = e["interval_95"]
            return f"{e['pass_at_1']:.1%} ({lo:.1%}–{hi:.1%}, {e['samples']} samples)"

        return fmt

    ratio = verdict["wall_s_per_step_ratio_lag1_over_lag0"]
    first = arms[COMPARED_LAGS[0]]
    lines = [
        f"learning bench, max_policy_lag {' vs '.join(map(str, COMPARED_LAGS))} — start: "
        f"{first['machine_start']}; end: {arms[COMPARED_LAGS[-1]]['machine_end']}",
        "",
        "| measure | " + " | ".join(f"lag {lag}" for lag in COMPARED_LAGS) + " |",
        "|---|" + "---|" * len(COMPARED_LAGS),
        f"| training run | {cells(lambda a: a['train_run'])} |",
        f"| wall time per learner step (s) | {cells(timing('wall_s_per_step', '.1f'))} |",
        f"| inference busy fraction | {cells(timing('inference_busy_fraction', '.0%'))} |",
        f"| learner busy fraction | {cells(timing('learner_busy_fraction', '.0%'))} |",
        f"| policy lag of trained tokens, mean | {cells(timing('policy_lag_mean', '.2f'))} |",
        f"| policy lag of trained tokens, max | {cells(timing('policy_lag_max', 'd'))} |",
        "| training reward per step | "
        + cells(lambda a: " ".join(f"{r:.2f}" for r in a["reward_per_step"]))
        + " |",
        f"| eval pass@1, version 0 | {cells(evaluation('eval_before'))} |",
        f"| eval pass@1 after training | {cells(evaluation('eval_after'))} |",
        f"| groups dropped as stale | {cells(lambda a: str(a['groups_stale']))} |",
        f"| PNG | {cells(lambda a: a['png'])} |",
        "",
        "wall time per step, lag 1 / lag 0: " + ("-" if ratio is None else f"{ratio:.2f}"),
        "eval pass@1 after training, lag 1 within lag 0's 95% interval or above: "
        + ("yes" if verdict["eval_after_lag1_within_or_above_lag0_interval"] else "no"),
        f"CPU pinning (HARNESSRL_PIN_CPUS): {first['pinned_cpus'] or 'off'}",
    ]
    return "\n".join(lines)


NO_CURRICULUM = "none"


def recipe_from_options(overrides: dict[str, Any], grpo: dict[str, Any]) -> Any:
    """The recipe that ``bench learning``'s options make of ``RECIPE``: an option left out keeps the recipe's value,
    except the curriculum under ``--holdout bugs`` (the bundled base rates cover the families split only, so the
    seen-functions diagnostic trains on every task); ``--curriculum none`` trains on every task."""
    from benchmarks.recipe import RECIPE

    every_task = overrides.get("curriculum") == NO_CURRICULUM or (
        overrides.get("curriculum") is None and overrides.get("holdout") == "bugs"
    )
    known = {f.name for f in fields(RECIPE)}
    recipe = replace(
        RECIPE, grpo=grpo, **{k: v for k, v in overrides.items() if v is not None and k in known}
    )
    return replace(recipe, curriculum=None) if every_task else recipe


def _band(param: click.Parameter, value: str | None) -> tuple[float, float] | str | None:
    if value is None or value.strip().lower() == NO_CURRICULUM:
        return value and NO_CURRICULUM
    try:
        low, high = (float(x) for x in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r}: two numbers LOW,HIGH, e.g. 0.1,0.6", param=param) from None
    if not 0.0 <= low <= high <= 1.0:
        raise click.BadParameter(f"{value!r}: need 0 <= LOW <= HIGH <= 1", param=param)
    return low, high


def _known_reward_fn(param: click.Parameter, value: str | None) -> str | None:
    from services.grader.grade import REWARD_FUNCTIONS

    if value is not None and value not in REWARD_FUNCTIONS:
        raise click.BadParameter(f"{value!r}; known: {', '.join(sorted(REWARD_FUNCTIONS))}", param=param)
    return value


@click.command("learning")
@click.option("--steps", type=int, help="Learner steps (default: the recipe's).")
@click.option("--learning-rate", type=float)
@click.option("--group-size", type=int)
@click.option("--groups-per-step", type=int)
@click.option("--temperature", type=float)
@click.option("--max-tokens", type=int)
@click.option("--eval-samples", type=int, help="Samples per eval task.")
@click.option("--train-tasks", type=int, help="Distinct train tasks cycled through.")
@click.option("--seed", type=int)
@click.option(
    "--seeds", "seeds_list", metavar="S1,S2,...",
    help="Run the recipe once per seed (each in a fresh suite) and report per seed and pooled.",
)  # fmt: skip
@click.option(
    "--pool", is_flag=True,
    help="Pool the JSON outputs (FILES) of earlier --seeds/--json invocations; runs nothing.",
)  # fmt: skip
@click.option(
    "--controls/--no-controls", default=True, show_default=True,
    help="Per run, the last version's answers equal to a training reference and its pass@1 with the issue "
    "withheld (one more eval).",
)  # fmt: skip
@click.argument("pool_files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--bf16-autocast",
    type=click.Choice(["auto", "true", "false"]),
    callback=lambda _ctx, _param, value: {"true": True, "false": False}.get(value, value),
    help="The learner's grpo.bf16_autocast (default: the recipe's, auto: bf16 where the CPU multiplies it "
    "natively, else fp32).",
)
@click.option(
    "--holdout",
    type=click.Choice(["families", "bugs"]),
    help="What the eval split holds out: whole functions never trained on (default: train/eval) or one unseen bug "
    'of functions trained on (seen_train/seen_eval, the "seen functions" diagnostic).',
)
@click.option(
    "--max-policy-lag",
    type=click.IntRange(0, 1000),
    help="The training run's grpo.max_policy_lag: versions sampling may run ahead of the learner (default: the "
    "recipe's, 1; 0 is on-policy).",
)
@click.option(
    "--compare-lags",
    is_flag=True,
    help="Train at max_policy_lag 0, then 1 (same seed and steps, each in a fresh suite with its evals) and "
    "report both side by side.",
)
@click.option(
    "--curriculum",
    metavar="LOW,HIGH",
    callback=lambda _ctx, param, value: _band(param, value),
    help="Train only on train tasks whose base solve rate (--solve-rates) lies in [LOW, HIGH] (default: the "
    "recipe's, 0.125,0.625; with --holdout bugs, none); none trains on every task of the split.",
)
@click.option(
    "--solve-rates",
    type=click.Path(exists=True, dir_okay=False),
    help="The solve-rates file the curriculum reads (default: the bundled base-model rates of swe_micro).",
)
@click.option(
    "--reward-fn",
    callback=lambda _ctx, param, value: _known_reward_fn(param, value),
    help="The training run's reward function (default: the recipe's, resolved; e.g. resolved_partial). The evals "
    "always score resolved.",
)
@click.option(
    "--grpo",
    "grpo_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A further grpo setting of the training run (repeatable), e.g. kl_coef=0.05 or normalize_std=true.",
)
@click.option(
    "--harness",
    type=click.Choice(["codeblock", "mini-swe-agent", "claude-code-bare"]),
    default="codeblock",
    show_default=True,
    help="codeblock: one model call per rollout (the recipe). mini-swe-agent: the agent path "
    "(benchmarks/agent.py): reference demonstrations, SFT, evals of base and SFT, GRPO from the SFT version "
    "through the agent, an eval of it. claude-code-bare: the same path through claude -p --bare (tool calls).",
)
@click.option(
    "--demo-tasks", type=click.IntRange(1, 10_000), help="mini-swe-agent: train tasks demonstrated."
)
@click.option("--sft-epochs", type=click.IntRange(1, 100), help="mini-swe-agent: SFT epochs.")
@click.option("--sft-learning-rate", type=float, help="mini-swe-agent: SFT learning rate.")
@click.option(
    "--base-eval/--no-base-eval",
    default=None,
    help="mini-swe-agent: evaluate the base weights (default), or skip that eval where it is on record.",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="PNG path.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option("--quiet/--verbose", default=True, help="Hide service logs.")
def bench_learning(
    out: Path | None,
    as_json: bool,
    quiet: bool,
    compare_lags: bool,
    grpo_pairs: tuple[str, ...],
    seeds_list: str | None,
    pool: bool,
    pool_files: tuple[Path, ...],
    controls: bool,
    harness: str,
    demo_tasks: int | None,
    sft_epochs: int | None,
    sft_learning_rate: float | None,
    base_eval: bool | None,
    **overrides: Any,
) -> None:
    """Eval version 0, train, eval the last version on SmolLM2-135M-Instruct; figures and a PNG.
    FILES: with --pool, the JSON outputs to pool."""
    from pydantic import ValidationError

    from benchmarks.recipe import DATASET, curriculum_tasks, suite_settings
    from services.cli.run import _key_values
    from shared.datasets import load_dataset
    from shared.run_config import GRPOConfig
    from shared.settings import get_settings

    seeds = _seeds(seeds_list, pool, pool_files, compare_lags, overrides)
    if pool:
        emit_report(get_settings(), read_pooled(pool_files), out, as_json)
        return
    if compare_lags and overrides["max_policy_lag"] is not None:
        raise click.UsageError("--compare-lags trains at max_policy_lag 0 and 1; leave out --max-policy-lag")
    grpo = _key_values(grpo_pairs, "--grpo")
    owned = {"learning_rate", "bf16_autocast", "seed", "max_policy_lag"} & set(grpo)
    if owned:
        raise click.BadParameter(f"{', '.join(sorted(owned))}: set with its own option", param_hint="--grpo")
    try:
        GRPOConfig.model_validate(grpo)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise click.BadParameter(f"{where}: {first['msg']}", param_hint="--grpo") from None
    agent = {
        "demo_tasks": demo_tasks, "sft_epochs": sft_epochs, "sft_learning_rate": sft_learning_rate,
        "base_eval": base_eval,
    }  # fmt: skip
    if harness != "codeblock":
        bench_agent(harness, overrides, grpo, agent, seeds, compare_lags, quiet, as_json)
        return
    if given := [f"--{k.replace('_', '-')}" for k, v in agent.items() if v is not None]:
        raise click.UsageError(f"{', '.join(given)}: only with --harness mini-swe-agent or claude-code-bare")
    recipe = recipe_from_options(overrides, grpo)
    # A curriculum that cannot fill a step fails here, before a suite starts or an eval runs.
    curriculum_tasks(recipe, [t.instance_id for t in load_dataset(DATASET, recipe.splits[0])])
    settings = suite_settings(get_settings(), recipe)
    if seeds:
        records = []
        kept = settings.data_dir / "bench" / f"learning-seeds-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
        for seed in seeds:
            png = None if out is None else out.with_name(f"{out.stem}-seed{seed}{out.suffix}")
            records.append(arm(settings, replace(recipe, seed=seed), png, quiet, controls))
            records[-1].pop("table")
            keep_record(kept, records[-1])
            click.echo(f"seed {seed} done; its record is kept in {kept} (--pool reads it)", err=True)
        emit_report(settings, records, out, as_json)
        return
    if not compare_lags:
        figures = arm(settings, recipe, out, quiet, controls)
        one_table = figures.pop("table")
        click.echo(json.dumps(figures, default=str) if as_json else one_table)
        return
    arms = {}
    for lag in COMPARED_LAGS:
        png = None if out is None else out.with_name(f"{out.stem}-lag{lag}{out.suffix}")
        arms[lag] = arm(settings, replace(recipe, max_policy_lag=lag), png, quiet, controls)
        arms[lag].pop("table")
    verdict = comparison(arms)
    if as_json:
        click.echo(json.dumps({"arms": {str(k): v for k, v in arms.items()}, **verdict}, default=str))
    else:
        click.echo(comparison_table(arms, verdict))


def bench_agent(
    harness: str, overrides: dict[str, Any], grpo: dict[str, Any], agent: dict[str, Any], seeds: list[int],
    compare_lags: bool, quiet: bool, as_json: bool,
) -> None:  # fmt: skip
    """``--harness mini-swe-agent`` or ``claude-code-bare``: the agent path (``benchmarks/agent.py``), one seed per
    invocation."""
    from benchmarks.agent import AGENT_HARNESSES, AGENT_RECIPE, agent_arm
    from benchmarks.recipe import suite_settings
    from shared.settings import get_settings

    refused = [name for name, given in (("--seeds", seeds), ("--compare-lags", compare_lags)) if given]
    refused += [
        f"--{k.replace('_', '-')}" for k in ("holdout", "curriculum", "solve_rates") if overrides.get(k)
    ]
    if refused:
        raise click.UsageError(
            f"{', '.join(refused)}: not with --harness {harness} (one seed per invocation: --seed S; the "
            "held-out functions; no curriculum, the bundled solve rates are codeblock's)"
        )
    known = {f.name for f in fields(AGENT_RECIPE.rl)}
    rl = replace(
        AGENT_RECIPE.rl, grpo=grpo, harness=AGENT_HARNESSES[harness],
        **{k: v for k, v in overrides.items() if v is not None and k in known},
    )  # fmt: skip
    recipe = replace(AGENT_RECIPE, rl=rl, **{k: v for k, v in agent.items() if v is not None})
    settings = suite_settings(get_settings(), rl)
    figures = agent_arm(settings, recipe, quiet)
    one_table = figures.pop("table")
    click.echo(json.dumps(figures, default=str) if as_json else one_table)


def _controls_rows(controls: dict[str, Any] | None) -> str:
    if controls is None:
        return ""
    ref, withheld = controls["reference_answers"], controls["issue_withheld"]
    share = "-" if ref["share"] is None else f"{ref['share']:.1%}"
    return (
        f"\n| control: last version's answers equal to a training reference function | {share} "
        f"({ref['equal_to_training_reference']}/{ref['answers']}; {ref['unreadable_patches']} patches unreadable) |"
        f"\n| control: pass@1 of the last version, issue text withheld | {withheld['pass_at_1']:.1%} "
        f"({withheld['passed']}/{withheld['samples']}) |"
    )


def run_controls(suite: Any, settings: Any, recipe: Any, result: Any, progress_for: Any) -> dict[str, Any]:
    """The two controls of the last version (``benchmarks/learning_seeds.py``): its answers equal to a training
    reference function, and its pass@1 with the issue text withheld (one more eval, same seed)."""
    from benchmarks.recipe import DATASET, evaluate
    from shared.datasets import load_dataset

    split = recipe.splits[1]
    total = len(load_dataset(DATASET, split)) * recipe.eval_samples
    withheld = evaluate(
        suite, settings, recipe, split, "eval-after-issue-withheld", progress_for("eval last version, issue withheld",
        total), result.train_run, issue="withheld",
    )  # fmt: skip
    return {
        "reference_answers": reference_share(settings, recipe, result.eval_after.run_id),
        "issue_withheld": {"eval": withheld.run_id, "passed": withheld.passed, "samples": withheld.samples,
                           "pass_at_1": withheld.pass_at_1, "interval_95": list(withheld.interval)},
    }  # fmt: skip


def arm(
    settings: Any, recipe: Any, out: Path | None, quiet: bool, with_controls: bool = True
) -> dict[str, Any]:
    """One learning procedure in a suite of its own: its figures (``LearningResult.as_dict`` plus the training
    run's time figures, the machine, the PNG) and, under ``table``, the one-arm table."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from benchmarks.recipe import plot, run_learning, step_metrics
    from services.cli.up import cpu_split, running_suite

    machine_start = describe_machine()
    console = Console(stderr=True)
    started = time.monotonic()
    with running_suite(settings, echo=not quiet) as suite, Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console,
    ) as progress:  # fmt: skip

        def progress_for(label: str, total: int):  # type: ignore[no-untyped-def]
            lag = "" if recipe.max_policy_lag is None else f" (max_policy_lag {recipe.max_policy_lag})"
            bar = progress.add_task(label + lag, total=total)
            return lambda done, _total: progress.update(bar, completed=done)

        result = run_learning(suite, suite.settings, recipe, progress_for)
        png = plot(result, out or suite.settings.data_dir / "bench" / f"learning-{result.train_run}.png")
        rows = step_metrics(suite.settings, result.train_run)
        paired = paired_figures(suite.settings, result.eval_before.run_id, result.eval_after.run_id)
        controls = None
        if with_controls:
            controls = run_controls(suite, suite.settings, recipe, result, progress_for)
    timing = step_figures(rows)
    split = cpu_split(settings)
    figures = result.as_dict() | {
        "seed": recipe.seed,
        "paired": paired,
        "controls": controls,
        "timing": None if timing is None else timing.as_dict(),
        "groups_stale": sum(r["groups_stale"] for r in rows),
        "pinned_cpus": None
        if split is None
        else {"inference": sorted(split[0]), "learner": sorted(split[1])},
        "machine_start": machine_start,
        "machine_end": describe_machine(),
        "png": str(png),
        "total_wall_s": time.monotonic() - started,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }
    figures["table"] = table(
        result, machine_start, figures["machine_end"], png, timing, paired
    ) + _controls_rows(controls)
    return figures


def _seeds(
    seeds_list: str | None,
    pool: bool,
    pool_files: tuple[Path, ...],
    compare_lags: bool,
    overrides: dict[str, Any],
) -> list[int]:
    """The seeds ``--seeds`` names, after refusing the combinations that make no sense (exit 2)."""
    if pool_files and not pool:
        raise click.UsageError("FILES are the JSON outputs to pool: add --pool")
    if pool:
        ran = [name for name, given in (("--seeds", seeds_list), ("--compare-lags", compare_lags)) if given]
        ran += [f"--{k.replace('_', '-')}" for k, v in overrides.items() if v is not None]
        if ran or not pool_files:
            raise click.UsageError(
                f"--pool runs nothing: drop {', '.join(ran)}"
                if ran
                else "--pool: name the JSON files to pool"
            )
        return []
    if seeds_list is None:
        return []
    try:
        seeds = [int(part) for part in seeds_list.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"expected seeds like 0,1,2, got {seeds_list!r}", param_hint="--seeds"
        ) from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise click.BadParameter(
            f"expected distinct seeds >= 0 like 0,1,2, got {seeds_list!r}", param_hint="--seeds"
        )
    if overrides.get("seed") is not None or compare_lags:
        raise click.UsageError("--seeds runs one recipe per seed: leave out --seed and --compare-lags")
    return seeds


def _documents(path: Path) -> list[Any]:
    """The JSON of ``path``: one document, or one per line (a JSON Lines file of seed records, e.g. the seeds of a
    recipe measured over several sittings and kept in ``docs/perf/seeds/``)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise click.BadParameter(f"{path}: not readable ({exc})", param_hint="--pool") from None
    try:
        return [json.loads(text)]
    except json.JSONDecodeError as whole:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            raise click.BadParameter(f"{path}: not JSON ({whole})", param_hint="--pool") from None


def read_pooled(files: tuple[Path, ...]) -> list[dict[str, Any]]:
    """The seed records of earlier ``--json`` outputs (a ``--seeds`` report, or a one-run object), or of a JSON
    Lines file of such records; exit 2 on a file that is not one, or on a seed that two records both hold."""
    records: list[dict[str, Any]] = []
    for path in files:
        found = [
            record
            for document in _documents(path)
            for record in (document.get("seeds", [document]) if isinstance(document, dict) else [None])
        ]
        if not found or not all(isinstance(r, dict) and "paired" in r and "seed" in r for r in found):
            raise click.BadParameter(
                f"{path}: not the --json output of harnessrl bench learning (no seed with paired figures)",
                param_hint="--pool",
            )
        records += found
    seen = [r["seed"] for r in records]
    twice = sorted({s for s in seen if seen.count(s) > 1})
    if twice:
        raise click.BadParameter(f"seed {twice[0]} is in more than one record", param_hint="--pool")
    return records


def emit_report(settings: Any, records: list[dict[str, Any]], out: Path | None, as_json: bool) -> None:
    """The pooled report of the seeds' records: PNG, TensorBoard folder, and the table or one JSON object."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    figures = report(records)
    png = plot_seeds(figures, out or settings.data_dir / "bench" / f"learning-seeds-{stamp}.png")
    figures["png"] = str(png)
    figures["tensorboard"] = str(write_tensorboard(settings, figures, f"bench-learning-seeds-{stamp}"))
    click.echo(json.dumps(figures, default=str) if as_json else report_table(figures))
