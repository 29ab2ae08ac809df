"""``harnessrl model export RUN [--version N] DIR``: a run's policy version as a plain Hugging Face model directory.

A full-weight run's version is its published safetensors over the base model; a LoRA run's version is the base model
with that version's adapter merged in (peft ``merge_and_unload``). Either way DIR holds ``config.json``, the weights
(``model.safetensors``, in the served dtype) and the base model's tokenizer and chat template files, loadable by
``transformers`` and vLLM with no peft at all. Without ``--version``: the run's newest published version.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import click

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
    "vocab.json",
    "merges.txt",
)


class ExportError(RuntimeError):
    """The version cannot be exported; the message says why."""


def _version_row(settings, run_id: str, version: int | None) -> tuple[int, str, Path]:  # type: ignore[no-untyped-def]
    """(version, object key, base model directory) of the run's requested (or newest) published version."""
    from sqlalchemy import select

    from shared.db import make_engine, session_factory, session_scope
    from shared.models import Run, Weight
    from shared.run_config import RunConfigError, read_run_config

    engine = make_engine(settings.database_url)
    try:
        with session_scope(session_factory(engine)) as session:
            run = session.get(Run, run_id)
            if run is None:
                raise ExportError(f"no run {run_id!r}")
            try:
                base_dir = Path(read_run_config(run).model_dir or settings.resolved_model_dir)
            except RunConfigError as exc:
                raise ExportError(str(exc)) from None
            query = select(Weight).where(Weight.run_id == run_id)
            query = query.where(Weight.version == version) if version is not None else query
            row = session.scalars(query.order_by(Weight.version.desc()).limit(1)).first()
            if row is None:
                wanted = f"published version {version}" if version is not None else "published version"
                raise ExportError(f"run {run_id} has no {wanted}")
            return row.version, row.object_key, base_dir
    finally:
        engine.dispose()


def export_version(settings, run_id: str, version: int | None, target: Path) -> tuple[int, Path]:  # type: ignore[no-untyped-def]
    import torch
    from safetensors.torch import load
    from transformers import AutoModelForCausalLM

    from shared.adapters import adapter_config_key, is_adapter_key
    from shared.objectstore import ObjectNotFound, open_store

    version, key, base_dir = _version_row(settings, run_id, version)
    store = open_store(settings)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype="auto")
    try:
        blob = store.get_bytes(key)
        if is_adapter_key(key):
            from peft import PeftModel

            with tempfile.TemporaryDirectory(prefix="harnessrl-export-") as tmp:
                (Path(tmp) / "adapter_model.safetensors").write_bytes(blob)
                (Path(tmp) / "adapter_config.json").write_bytes(store.get_bytes(adapter_config_key(key)))
                model = PeftModel.from_pretrained(base, tmp).merge_and_unload()
        else:
            missing, unexpected = base.load_state_dict(load(blob), strict=False)
            tied = bool(getattr(base.config, "tie_word_embeddings", False))
            if unexpected or [m for m in missing if not (tied and m == "lm_head.weight")]:
                raise ExportError(
                    f"version {version} does not fit the base model: {missing[:3]} {unexpected[:3]}"
                )
            model = base
    except ObjectNotFound as exc:
        raise ExportError(f"version {version} of run {run_id}: object {exc} is missing") from None
    target.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        model.save_pretrained(target)
    for name in TOKENIZER_FILES:
        if (base_dir / name).is_file():
            shutil.copy2(base_dir / name, target / name)
    return version, target


@click.command("export")
@click.argument("run_id")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--version", type=int, default=None, help="Policy version (default: the newest published).")
def export_model(run_id: str, directory: Path, version: int | None) -> None:
    """Write RUN's policy VERSION (a LoRA run: base + adapter merged) as a plain Hugging Face model DIRECTORY."""
    from shared.settings import get_settings

    try:
        exported, target = export_version(get_settings(), run_id, version, directory)
    except ExportError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"run {run_id} version {exported} written to {target}")
