"""Several seeds of the learning recipe, paired and pooled: what ``harnessrl bench learning --seeds`` and
``--pool`` report (``benchmarks/learning.py`` runs the seeds; this module holds the figures).

Each seed's record is its one-seed figures (``bench_learning.arm``) plus ``seed`` and ``paired``: version 0 and
the last version were evaluated with that seed's eval seed, so sample i of task t is the same seeded draw in both;
``paired`` holds the pairs per task (``pairs_by_task``: ``[[version 0 passed, last version passed], ...]``) and
their comparison (``shared/paired_stats.py``: Δ pass@1, per-task cluster bootstrap interval, McNemar).

``report(seeds)`` pools a list of such records (from one invocation, or from the JSON of several with ``--pool``):
the comparison over every seed's pairs (each task one cluster holding its pairs of every seed), the mean ± sd of
Δ across seeds, each seed's training reward last 3 − first 3, the reward curves per seed and their mean (by step,
over the steps every seed has), and the wall time per seed and in total.

Two controls per seed (``controls``), on the last version's eval answers: the share equal to a training task's
reference function (``shared/reference_answers.py``; near 0 when the eval split shares no function with training),
and pass@1 of the last version with the issue text withheld (``RunSpec.issue``: one fixed line instead of each
task's problem statement; what the policy solves from the code alone or from answers learned by heart).
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean
from typing import Any

import click

from shared.paired_stats import NotComparable, Pair, across_seeds, compare, compare_pooled, pair_samples
from shared.settings import Settings

PAIRS_KEY = "pairs_by_task"


def paired_figures(settings: Settings, before_eval: str, after_eval: str) -> dict[str, Any]:
    """The paired comparison of a seed's two evals (through the api, while the suite runs)."""
    from benchmarks.recipe import api
    from services.cli.eval import sample_outcomes

    samples = [
        sample_outcomes(api(settings, "GET", f"/v1/evals/{e}/samples")) for e in (before_eval, after_eval)
    ]
    try:
        pairs, dropped = pair_samples(*samples)
    except NotComparable as exc:
        raise click.ClickException(f"evals {before_eval} and {after_eval} do not pair: {exc}") from None
    return {
        PAIRS_KEY: {t: [list(p) for p in ps] for t, ps in pairs.items()},
        **compare(pairs, dropped).as_dict(),
    }


def reference_share(settings: Settings, recipe: Any, after_eval: str) -> dict[str, Any]:
    """The share of the last version's eval answers (graded samples) whose changed function equals a training
    task's reference function (normalized); answers whose patch does not apply count apart."""
    from benchmarks.recipe import api

    graded = [
        s
        for s in api(settings, "GET", f"/v1/evals/{after_eval}/samples")["samples"]
        if s["passed"] is not None
    ]
    answers = [
        (
            s["instance_id"],
            (api(settings, "GET", f"/v1/rollouts/{s['rollout_id']}").get("patch") or {}).get("text"),
        )
        for s in graded
    ]
    return reference_matches(recipe, [(task, patch or "") for task, patch in answers])


def reference_matches(recipe: Any, answers: list[tuple[str, str]]) -> dict[str, Any]:
    """Of ``answers`` ((instance id, patch) of tasks of the recipe's datasets), how many change a function into
    one a reference fix of the recipe's train split writes."""
    from benchmarks.recipe import DATASET
    from shared.datasets import load_dataset, reference_patch
    from shared.reference_answers import PatchMismatch, patched_functions, reference_functions

    def repo(task: Any) -> Path:  # the bundled datasets' tasks are directory sources
        return Path(task.source.path)

    repos = {t.instance_id: repo(t) for t in load_dataset(DATASET)}
    train = load_dataset(DATASET, recipe.splits[0])
    references = reference_functions((repo(t), reference_patch(DATASET, t.instance_id)) for t in train)
    equal = unreadable = 0
    for instance_id, patch in answers:
        try:
            equal += bool(patched_functions(repos[instance_id], patch) & references)
        except PatchMismatch:
            unreadable += 1
    return {
        "answers": len(answers), "equal_to_training_reference": equal, "unreadable_patches": unreadable,
        "share": equal / len(answers) if answers else None, "training_references": len(references),
    }  # fmt: skip


def keep_record(path: Path, record: dict[str, Any]) -> None:
    """Append one finished seed's record to ``path`` (JSON Lines), so that the seeds a long ``--seeds`` run has
    finished survive its stop or crash: ``--pool path`` reads them back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(record, default=str) + "\n")


def _pairs(record: dict[str, Any]) -> dict[str, list[Pair]]:
    return {t: [(bool(a), bool(b)) for a, b in ps] for t, ps in record["paired"][PAIRS_KEY].items()}


def mean_curve(curves: list[list[float]]) -> list[float]:
    """The mean of the curves step by step, over the steps every curve has."""
    steps = min((len(c) for c in curves), default=0)
    return [mean(c[i] for c in curves) for i in range(steps)]


def rise(curve: list[float]) -> float:
    """Mean of the last three points − mean of the first three (fewer when the curve is shorter than six)."""
    k = min(3, len(curve) // 2) or 1
    return sum(curve[-k:]) / k - sum(curve[:k]) / k if curve else 0.0


def report(seeds: list[dict[str, Any]]) -> dict[str, Any]:
    """The pooled figures of the seeds' records (module docstring)."""
    if not seeds:
        raise ValueError("no seed to pool")
    ordered = sorted(seeds, key=lambda r: r["seed"])
    pooled = compare_pooled(
        [_pairs(r) for r in ordered], dropped=sum(r["paired"]["dropped"] for r in ordered)
    )
    spread = across_seeds([r["paired"]["delta"] for r in ordered])
    per_seed = [
        {
            "seed": r["seed"], "delta": r["paired"]["delta"], "interval_95": r["paired"]["interval_95"],
            "within_noise": r["paired"]["within_noise"], "mcnemar_p": r["paired"]["mcnemar_p"],
            "pass_at_1_before": r["paired"]["pass_at_1_a"], "pass_at_1_after": r["paired"]["pass_at_1_b"],
            "reward_rise_last3_vs_first3": r["reward_rise_last3_vs_first3"], "wall_s": r["total_wall_s"],
            "reward_fn": (r.get("recipe") or {}).get("reward_fn", "resolved"),
            "resolved_rise_last3_vs_first3": rise(r.get("resolved_per_step") or r["reward_per_step"]),
            "train_run": r["train_run"],
            "reference_answer_share": (r.get("controls") or {}).get("reference_answers", {}).get("share"),
            "pass_at_1_issue_withheld": (r.get("controls") or {}).get("issue_withheld", {}).get("pass_at_1"),
        }
        for r in ordered
    ]  # fmt: skip
    curves = {str(r["seed"]): r["reward_per_step"] for r in ordered}
    return {
        "seeds": ordered,
        "per_seed": per_seed,
        "pooled": pooled.as_dict(),
        "across_seeds": {"seeds": spread.seeds, "delta_mean": spread.mean, "delta_sd": spread.sd},
        "curves": {"reward_per_step": curves, "reward_per_step_mean": mean_curve(list(curves.values()))},
        "wall_s": {
            "per_seed": {str(r["seed"]): r["total_wall_s"] for r in ordered},
            "total": sum(r["total_wall_s"] for r in ordered),
        },  # fmt: skip
    }


def _resolved_rise(per_seed: dict[str, Any]) -> str:
    """Beside a reward other than ``resolved``: the rise of the resolved share."""
    if per_seed.get("reward_fn", "resolved") == "resolved":
        return ""
    return f" ({per_seed['reward_fn']}; resolved {per_seed['resolved_rise_last3_vs_first3']:+.3f})"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _points(value: float) -> str:
    return f"{100 * value:+.1f}"


def report_table(figures: dict[str, Any]) -> str:
    """The report as text: one line per seed, then the pooled figures."""
    lines = [
        "| seed | version 0 → last | Δ pass@1 (points) | paired 95% CI | McNemar p | reward last 3 − first 3 "
        "| answers = a training reference | pass@1, issue withheld | wall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in figures["per_seed"]:
        lo, hi = s["interval_95"]
        lines.append(
            f"| {s['seed']} | {s['pass_at_1_before']:.1%} → {s['pass_at_1_after']:.1%} | {_points(s['delta'])} | "
            f"{_points(lo)} to {_points(hi)}{' (within noise)' if s['within_noise'] else ''} | "
            f"{s['mcnemar_p']:.3g} | {s['reward_rise_last3_vs_first3']:+.3f}{_resolved_rise(s)} | "
            f"{_share(s['reference_answer_share'])} | "
            f"{_share(s['pass_at_1_issue_withheld'])} | {s['wall_s'] / 60:.1f} min |"
        )
    p, spread = figures["pooled"], figures["across_seeds"]
    lo, hi = p["interval_95"]
    sd = "-" if spread["delta_sd"] is None else f"{100 * spread['delta_sd']:.1f}"
    lines += [
        "",
        f"pooled over {spread['seeds']} seeds ({p['tasks']} tasks, {p['pairs']} paired samples): Δ pass@1 "
        f"{_points(p['delta'])} points, paired 95% CI {_points(lo)} to {_points(hi)} (per-task cluster bootstrap)"
        + (" — within noise: the interval includes 0" if p["within_noise"] else " — the interval excludes 0"),
        f"Δ across seeds: mean {_points(spread['delta_mean'])} ± sd {sd} points",
        "mean training reward per step over seeds: "
        + " ".join(f"{r:.2f}" for r in figures["curves"]["reward_per_step_mean"]),
        f"wall time: {figures['wall_s']['total'] / 60:.1f} min in total",
    ]
    if figures.get("png"):
        lines.append(f"PNG: {figures['png']}")
    if figures.get("tensorboard"):
        lines.append(f"TensorBoard: {figures['tensorboard']}")
    return "\n".join(lines)


def plot_seeds(figures: dict[str, Any], out: Path) -> Path:
    """PNG: each seed's training reward per step (thin), their mean (bold), and each seed's eval pass@1 at
    version 0 and the last version."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for seed, curve in figures["curves"]["reward_per_step"].items():
        line = ax.plot(range(len(curve)), curve, alpha=0.45, label=f"training reward, seed {seed}")[0]
        s = next(p for p in figures["per_seed"] if str(p["seed"]) == seed)
        ax.plot([0, max(len(curve), 1)], [s["pass_at_1_before"], s["pass_at_1_after"]], "s--",
                color=line.get_color(), alpha=0.7)  # fmt: skip
    average = figures["curves"]["reward_per_step_mean"]
    ax.plot(
        range(len(average)), average, color="black", linewidth=2.5, label="training reward, mean of seeds"
    )
    p = figures["pooled"]
    lo, hi = p["interval_95"]
    ax.set_title(
        f"eval Δ pass@1 pooled {_points(p['delta'])} points (paired 95% CI {_points(lo)} to {_points(hi)})",
        fontsize=9,
    )
    ax.set_xlabel("step (policy version); squares: eval pass@1 at version 0 and the last version")
    ax.set_ylabel("reward / pass@1")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def write_tensorboard(settings: Settings, figures: dict[str, Any], name: str) -> Path:
    """The curves per seed and their mean, and each seed's eval pass@1, in one TensorBoard folder ``name``."""
    from shared.tensorboard import ScalarLog, run_logdir

    log = ScalarLog(settings, writer="bench")
    try:
        curves = figures["curves"]
        for step in range(max((len(c) for c in curves["reward_per_step"].values()), default=0)):
            scalars: dict[str, float | int | None] = {
                f"train/reward_seed_{seed}": c[step] if step < len(c) else None
                for seed, c in curves["reward_per_step"].items()
            }
            mean_curve_ = curves["reward_per_step_mean"]
            scalars["train/reward_mean_of_seeds"] = mean_curve_[step] if step < len(mean_curve_) else None
            log.write(name, step, scalars)
        for s in figures["per_seed"]:
            steps = len(curves["reward_per_step"][str(s["seed"])])
            log.write(name, 0, {f"eval/pass_at_1_seed_{s['seed']}": s["pass_at_1_before"]})
            log.write(name, steps, {f"eval/pass_at_1_seed_{s['seed']}": s["pass_at_1_after"]})
    finally:
        log.close()
    return run_logdir(settings, name)
