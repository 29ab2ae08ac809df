"""``harnessrl model ...``: build and inspect policy model directories."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def model() -> None:
    """Policy model directories (the tiny test/demo model)."""


@model.command("init-tiny")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--tied", is_flag=True, help="Tie the input embedding and the lm_head (default: untied).")
def init_tiny(directory: Path | None, tied: bool) -> None:
    """Build the deterministic tiny Qwen3 model into DIRECTORY (default: the configured model dir)."""
    from services.inference.tiny_model import build_tiny_model
    from shared.settings import get_settings

    target = directory if directory is not None else get_settings().resolved_model_dir
    if target.exists() and not target.is_dir():
        raise click.BadParameter(f"{target} exists and is not a directory", param_hint="DIRECTORY")
    built = build_tiny_model(target, tied=tied)
    click.echo(f"tiny model ({'tied' if tied else 'untied'}) written to {built}")
