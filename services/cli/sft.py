"""``harnessrl sft``: supervised fine-tuning on recorded rollouts, through the REST API (``POST /v1/sft``).

The data is a selection of recorded rollouts: ``--from-run RUN [--min-reward R]`` or ``--where "SQL"`` (a
condition over the ``trajectories`` view, as ``harnessrl sql`` queries it). The command prints the new run's id
on stdout (so ``RUN=$(harnessrl sft ...)`` works) and what it selected on stderr; ``--follow`` then prints each
step's loss until the run ends. The run's versions are what ``harnessrl eval --run RUN`` evaluates.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from services.cli.run import _key_values, _print_json, api_client, api_option, json_option, watch_run
from services.cli.step_figures import step_records


def _step_lines(printed: set[int]) -> Callable[[dict[str, Any]], None]:
    """A ``watch_run`` renderer printing each newly committed step once (to stderr)."""

    def render(detail: dict[str, Any]) -> None:
        for record in step_records(detail["step_metrics"]):
            if record.step in printed:
                continue
            printed.add(record.step)
            u = record.update
            rate = f" ({u.tokens_computed / u.update_s:,.0f} tokens/s)" if u.update_s else ""
            click.echo(
                f"step {record.step}/{detail['steps']} loss {u.loss:.4f} trained tokens {int(u.loss_tokens)}{rate}",
                err=True,
            )

    return render


@click.command("sft")
@click.option(
    "--from-run", default=None, help="Train on this run's rollouts (with --min-reward: the rewarded ones)."
)
@click.option(
    "--min-reward", type=float, default=None, help="With --from-run: only rollouts rewarded at least this."
)
@click.option(
    "--where", default=None, help="Or: a SQL condition over the trajectories view selecting the rollouts."
)
@click.option("--epochs", type=int, default=1, show_default=True)
@click.option("--batch-rollouts", type=int, default=8, show_default=True, help="Rollouts per optimizer step.")
@click.option("--learning-rate", type=float, default=1e-5, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds each epoch's shuffle.")
@click.option(
    "--lora/--full", default=False, show_default=True, help="Train a LoRA adapter, or the full weights."
)
@click.option(
    "--lora-option", "lora_options", multiple=True, metavar="KEY=VALUE", help="LoRA setting (rank=8)."
)
@click.option(
    "--grpo", "grpo", multiple=True, metavar="KEY=VALUE",
    help="Learner setting of the run's grpo section (strategy, max_grad_norm, checkpoint_every, ...).",
)  # fmt: skip
@click.option("--name", default="")
@click.option("--follow", is_flag=True, help="Print each step's loss until the run ends.")
@api_option
@json_option
def sft(
    from_run: str | None, min_reward: float | None, where: str | None, epochs: int, batch_rollouts: int,
    learning_rate: float, seed: int, lora: bool, lora_options: tuple[str, ...], grpo: tuple[str, ...], name: str,
    follow: bool, api_url: str | None, as_json: bool,
) -> None:  # fmt: skip
    """Fine-tune the policy on recorded rollouts (cross-entropy on the tokens the model or a teacher produced);
    prints the run id."""
    if (from_run is None) == (where is None):
        raise click.UsageError("select the data with --from-run RUN [--min-reward R] or with --where SQL")
    if lora_options and not lora:
        raise click.BadParameter("needs --lora", param_hint="--lora-option")
    body: dict[str, Any] = {
        "name": name, "from_run": from_run, "min_reward": min_reward, "where": where, "epochs": epochs,
        "batch_rollouts": batch_rollouts, "learning_rate": learning_rate, "seed": seed,
        "lora": _key_values(lora_options, "--lora-option") if lora else None, "grpo": _key_values(grpo, "--grpo"),
    }  # fmt: skip
    with api_client(api_url) as client:
        created = client.create_sft(body)
        spec = created["config"]["sft"]
        if as_json and not follow:
            _print_json(created)
            return
        click.echo(created["id"])
        click.echo(
            f"sft run {created['id']}: {len(spec['rollout_ids'])} rollouts, {spec['epochs']} epoch(s), "
            f"{created['steps']} steps; evaluate it with: harnessrl eval --run {created['id']}",
            err=True,
        )
        if not follow:
            return
        final = watch_run(client, created["id"], 2.0, _step_lines(set()), None)
    if as_json:
        _print_json(final)
    if final["status"] != "completed":
        click.echo(
            f"harnessrl: sft run {created['id']} ended {final['status']}: {final.get('error')}", err=True
        )
        sys.exit(1)
