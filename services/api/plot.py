"""The reward-curve PNG of a run (``GET /v1/runs/{id}/plot``, and the demo's summary), drawn with matplotlib Agg.

Top panel: mean reward per sampling step with a +-1 std band and min/max ticks, and, for a run with
``config.eval``, eval pass@1 with its 95 % interval at each step an eval ran before. Bottom panel (when the learner
has written steps): loss and KL per learner step. Pure function of the detail document, so the CLI and tests
can draw the same picture without the server.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # no display; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402

from services.api.schemas import RunDetail  # noqa: E402


def reward_curve_png(detail: RunDetail, dpi: int = 100) -> bytes:
    has_learner = bool(detail.step_metrics)
    fig, axes = plt.subplots(
        2 if has_learner else 1, 1, figsize=(7, 6 if has_learner else 3.6), squeeze=False
    )
    try:
        reward_ax = axes[0][0]
        points = detail.reward_curve
        if points:
            steps = [p.step for p in points]
            mean = [p.reward_mean for p in points]
            low = [p.reward_mean - p.reward_std for p in points]
            high = [p.reward_mean + p.reward_std for p in points]
            reward_ax.fill_between(steps, low, high, alpha=0.2, label="±1 std")
            reward_ax.plot(steps, mean, marker="o", label="mean reward")
            reward_ax.scatter(steps, [p.reward_max for p in points], marker="^", s=12, label="max")
            reward_ax.scatter(steps, [p.reward_min for p in points], marker="v", s=12, label="min")
        evals = [p for p in detail.eval_curve if p.pass_at_1 is not None]
        if evals:
            at = [p.at_step for p in evals]
            value = [p.pass_at_1 or 0.0 for p in evals]
            low = [
                v - (v if p.pass_at_1_low is None else p.pass_at_1_low)
                for v, p in zip(value, evals, strict=True)
            ]
            high = [
                (v if p.pass_at_1_high is None else p.pass_at_1_high) - v
                for v, p in zip(value, evals, strict=True)
            ]
            reward_ax.errorbar(at, value, yerr=[low, high], fmt="s--", capsize=4, color="tab:red",
                               label="eval pass@1 (95% CI)")  # fmt: skip
        if points or evals:
            reward_ax.legend(loc="best", fontsize=8)
        if not points:
            reward_ax.text(
                0.5, 0.5, "no graded rollouts yet", ha="center", va="center", transform=reward_ax.transAxes
            )
        reward_ax.set_xlabel("step")
        reward_ax.set_ylabel("reward")
        reward_ax.set_title(f"{detail.name or detail.id} · {detail.harness} · {detail.status}")
        reward_ax.grid(alpha=0.3)
        if has_learner:
            loss_ax = axes[1][0]
            learner_steps = [m.step for m in detail.step_metrics]
            nan = float("nan")  # a metric the learner did not record leaves a gap, not a crash
            loss_ax.plot(
                learner_steps,
                [nan if m.loss is None else m.loss for m in detail.step_metrics],
                marker="o",
                label="loss",
            )
            loss_ax.plot(
                learner_steps,
                [nan if m.kl is None else m.kl for m in detail.step_metrics],
                marker="x",
                label="kl",
            )
            loss_ax.set_xlabel("learner step")
            loss_ax.legend(loc="best", fontsize=8)
            loss_ax.grid(alpha=0.3)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=dpi)
        return buffer.getvalue()
    finally:
        plt.close(fig)
