"""Checkpoint validation without a server: every defect is named, a good checkpoint passes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save

from services.inference.checkpoint import (
    CheckpointRejected,
    TensorSpec,
    read_header,
    served_tensor_specs,
    validate_checkpoint,
)

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def base(tiny_model_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(tiny_model_dir / "model.safetensors"))


def test_served_specs_come_from_the_model_dir(tiny_model_dir: Path, tiny_model_dir_tied: Path) -> None:
    untied = served_tensor_specs(tiny_model_dir)
    assert untied["lm_head.weight"] == TensorSpec("F32", (4096, 256))
    assert untied["model.layers.0.self_attn.k_proj.weight"] == TensorSpec("F32", (128, 256))
    assert set(untied) - set(served_tensor_specs(tiny_model_dir_tied)) == {"lm_head.weight"}


def test_the_base_checkpoint_and_its_sha256_pass(tiny_model_dir: Path, base: dict[str, torch.Tensor]) -> None:
    blob = save(base)
    validate_checkpoint(blob, served_tensor_specs(tiny_model_dir), hashlib.sha256(blob).hexdigest())


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("missing", "missing tensor(s) model.norm.weight"),
        ("shape", "has shape (4096, 128), the served model has (4096, 256)"),
        ("dtype", "'model.norm.weight' has dtype F16, the served model has F32"),
        ("extra", "unexpected tensor(s) bonus"),
        ("inf", "NaN or infinite"),
        ("truncated", "truncated or corrupt"),
        ("empty", "too short to be safetensors"),
        ("header", "header is not JSON"),
        ("sha", "does not match the published"),
    ],
)
def test_each_defect_is_rejected_with_its_reason(
    tiny_model_dir: Path, base: dict[str, torch.Tensor], case: str, reason: str
) -> None:
    state = dict(base)
    sha256 = None
    if case == "missing":
        del state["model.norm.weight"]
    elif case == "shape":
        state["lm_head.weight"] = torch.zeros(4096, 128)
    elif case == "dtype":
        state["model.norm.weight"] = state["model.norm.weight"].half()
    elif case == "extra":
        state["bonus"] = torch.zeros(1)
    elif case == "inf":
        state["model.norm.weight"] = torch.full((256,), float("inf"))
    elif case == "sha":
        sha256 = "f" * 64
    blob = save(state)
    if case == "truncated":
        blob = blob[:-100]
    elif case == "empty":
        blob = b"abc"
    elif case == "header":
        blob = (20).to_bytes(8, "little") + b"{not json at all....." + blob[29:]
    with pytest.raises(CheckpointRejected, match=None) as rejected:
        validate_checkpoint(blob, served_tensor_specs(tiny_model_dir), sha256)
    assert reason in str(rejected.value)


def test_header_reader_refuses_an_absurd_header_length() -> None:
    with pytest.raises(CheckpointRejected, match="header length"):
        read_header((2**40).to_bytes(8, "little") + b"{}")
