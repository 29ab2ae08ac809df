"""``harnessrl model export``: a run's version as a plain Hugging Face directory — full weights as published, a
LoRA run's adapter merged into the base — loadable by transformers without peft; bad input is a clear error."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from safetensors.torch import load

from services.learner.loop import Learner

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _export(settings_env, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    command = [sys.executable, "-m", "services.cli.main", "model", "export", *args]
    return subprocess.run(command, env=settings_env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("lora", [None, {"rank": 4, "alpha": 8.0}])
def test_export_writes_the_trained_policy(settings, settings_env, store, learner_run, tmp_path, lora) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoModelForCausalLM

    run = learner_run(groups_per_step=1, learning_rate=5e-2, lora=lora)
    run.add_group([1.0, 0.0, 0.5, 0.0], seed=3)
    learner = Learner(settings, run.run_id, consumer="c1")
    try:
        assert learner.step_once(wait_s=5) is not None
        ids = torch.arange(100, 140)[None]
        with torch.no_grad():
            trained_logits = learner.model(input_ids=ids).logits
    finally:
        learner.close()
    done = _export(settings_env, run.run_id, str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"run {run.run_id} version 1 written" in done.stdout
    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype=torch.float32).eval()
    assert not any("lora" in name for name in exported.state_dict())
    assert (tmp_path / "out" / "tokenizer.json").is_file()
    with torch.no_grad():
        assert torch.allclose(exported(input_ids=ids).logits, trained_logits, atol=1e-4)
    if lora is None:
        published = load(store.get_bytes(f"weights/{run.run_id}/1/model.safetensors"))
        for name, tensor in published.items():
            assert torch.equal(exported.state_dict()[name], tensor), name
    missing = _export(settings_env, run.run_id, str(tmp_path / "none"), "--version", "7")
    assert missing.returncode != 0 and "no published version 7" in missing.stderr
    unknown = _export(settings_env, "run_nope", str(tmp_path / "none"))
    assert unknown.returncode != 0 and "no run 'run_nope'" in unknown.stderr
