"""``harnessrl``: the command line. Subcommands live next to the code they drive and load lazily, so
``harnessrl db upgrade`` does not import torch.

Add a command by naming it in ``COMMANDS`` (top level) or ``SERVE`` / ``BENCH`` / ``WORKER`` (grouped):
``"name": "module.path:click_object"``.
"""

from __future__ import annotations

import importlib
import sys

import click

from shared.settings import SettingsError

COMMANDS: dict[str, str] = {
    "db": "services.cli.db:db",
    "up": "services.cli.up:up",
    "demo": "benchmarks.demo:demo",
    "model": "services.inference.cli:model",
    "run": "services.cli.run:run",
    "rollout": "services.cli.rollout:rollout",
    "sql": "services.cli.sql:sql",
    "eval": "services.cli.eval:eval_command",
    "sft": "services.cli.sft:sft",
}
SERVE: dict[str, str] = {
    "api": "services.api.serve:serve_api",
    "gateway": "services.gateway.serve:serve_gateway",
    "learner": "services.learner.cli:learner",
    "learners": "services.learner.controller:serve_learners",
    "inference": "services.inference.serve:serve_inference",
}
BENCH: dict[str, str] = {
    "rollouts": "benchmarks.rollouts:bench_rollouts",
    "learner": "benchmarks.learner:bench_learner",
    "inference": "benchmarks.inference:bench_inference",
    "gateway": "benchmarks.gateway:bench_gateway",
    "providers": "benchmarks.providers:bench_providers",
    "sandbox": "benchmarks.sandbox:bench_sandbox",
    "learning": "benchmarks.learning:bench_learning",
}
EXTRA: dict[str, dict[str, str]] = {
    # Commands added to a group that another service's module defines (no service imports another's package).
    "model": {"export": "services.learner.export:export_model"},
}
WORKER: dict[str, str] = {
    "runner": "services.runner.worker:runner_worker",
    "grader": "services.grader.worker:grader_worker",
}


def _load(path: str) -> click.Command:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


class LazyGroup(click.Group):
    def __init__(self, *args, lazy: dict[str, str], **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kw)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            command = _load(self.lazy[name])
            if isinstance(command, click.Group):
                for extra, path in EXTRA.get(name, {}).items():
                    if extra not in command.commands:
                        command.add_command(_load(path), extra)
            return command
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """harnessrl: RL for unmodified coding-agent harnesses."""


@cli.group(cls=LazyGroup, lazy=SERVE)
def serve() -> None:
    """Run one service in the foreground."""


@cli.group(cls=LazyGroup, lazy=BENCH)
def bench() -> None:
    """Benchmarks; each prints a table (or one JSON object with --json)."""


@cli.group(cls=LazyGroup, lazy=WORKER)
def worker() -> None:
    """Run a Celery worker (runner or grader)."""


def main() -> None:
    try:
        cli.main(standalone_mode=True)
    except SettingsError as exc:
        click.echo(f"harnessrl: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
