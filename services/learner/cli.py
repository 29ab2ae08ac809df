"""``harnessrl serve learner --run ID``: the learner process of one run — ``loop.py`` for a training run,
``sft_loop.py`` for an SFT run."""

from __future__ import annotations

import os
import sys

import click


@click.command("learner")
@click.option(
    "--run",
    "--run-id",
    "run_id",
    required=True,
    help="Run id to train (--run-id under torchrun, which owns --run*).",
)
@click.option(
    "--max-steps", type=int, default=None, help="Stop after this many steps (default: run until stopped)."
)
@click.option(
    "--idle-exit-s", type=float, default=None, help="Stop after this long without a trainable group."
)
@click.option(
    "--consumer", default=None, help="Consumer name in the stream's consumer group (default: per host)."
)
def learner(run_id: str, max_steps: int | None, idle_exit_s: float | None, consumer: str | None) -> None:
    """Train the run: GRPO steps on its complete groups, or an SFT run's epochs on its recorded rollouts; a new
    policy version after each step."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from services.learner.loop import Learner, LearnerError
    from services.learner.sft_loop import SFTError, SFTLearner, is_sft_run
    from shared.settings import get_settings

    settings = get_settings()
    worker: Learner | SFTLearner
    try:
        worker = (
            SFTLearner(settings, run_id)
            if is_sft_run(settings, run_id)
            else Learner(settings, run_id, consumer)
        )
    except (LearnerError, SFTError) as exc:
        click.echo(f"harnessrl serve learner: {exc}", err=True)
        sys.exit(2)
    click.echo(f"learner ready: run {run_id}, policy version {worker.state.policy_version}")
    try:
        steps = worker.run(max_steps=max_steps, idle_exit_s=idle_exit_s)
    finally:
        worker.close()
    click.echo(f"learner stopped after {steps} step(s); policy version {worker.state.policy_version}")
