"""Validate a published checkpoint against the served model before it goes anywhere near the engine.

A checkpoint is one safetensors blob with HF parameter names. It is accepted only if it has exactly the served
model's tensors (names), each with the served shape and dtype, every value finite, and (when the publisher
recorded one) the published sha256. Anything else raises ``CheckpointRejected`` with a message that says which
tensor and why; the updater writes that message on the ``weights`` row.

The served model's tensor specs are read from the safetensors headers in its model directory (no tensor data
is loaded), so validation needs no call into vLLM.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_HEADER_BYTES = 100 * 1024 * 1024


class CheckpointRejected(ValueError):
    """The checkpoint cannot be served; the message names the problem."""


@dataclass(frozen=True)
class TensorSpec:
    dtype: str  # safetensors dtype name, e.g. "F32"
    shape: tuple[int, ...]


def read_header(blob: bytes | memoryview, source: str = "checkpoint") -> dict[str, dict[str, Any]]:
    """The safetensors header (tensor name → dtype, shape, data_offsets), checked for internal consistency."""
    if len(blob) < 8:
        raise CheckpointRejected(f"{source} is {len(blob)} bytes, too short to be safetensors")
    (header_len,) = struct.unpack("<Q", bytes(blob[:8]))
    if header_len > min(MAX_HEADER_BYTES, len(blob) - 8):
        raise CheckpointRejected(f"{source} is not safetensors (header length {header_len} out of range)")
    try:
        header = json.loads(bytes(blob[8 : 8 + header_len]))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointRejected(f"{source} is not safetensors (header is not JSON: {exc})") from None
    if not isinstance(header, dict):
        raise CheckpointRejected(f"{source} is not safetensors (header is not an object)")
    header.pop("__metadata__", None)
    data_len = len(blob) - 8 - header_len
    for name, entry in header.items():
        try:
            begin, end = entry["data_offsets"]
            shape = entry["shape"]
            dtype = entry["dtype"]
        except (KeyError, TypeError, ValueError):
            raise CheckpointRejected(f"{source}: malformed header entry for {name!r}") from None
        if not (0 <= begin <= end <= data_len):
            raise CheckpointRejected(
                f"{source}: tensor {name!r} lies outside the data ({begin}..{end} of {data_len} bytes); "
                "truncated or corrupt"
            )
        if not isinstance(shape, list) or not isinstance(dtype, str):
            raise CheckpointRejected(f"{source}: malformed header entry for {name!r}")
    return header


def served_tensor_specs(model_dir: Path) -> dict[str, TensorSpec]:
    """Name → dtype and shape of every tensor in the model directory's safetensors files."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {model_dir}")
    specs: dict[str, TensorSpec] = {}
    for path in files:
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_len))
        header.pop("__metadata__", None)
        for name, entry in header.items():
            specs[name] = TensorSpec(entry["dtype"], tuple(entry["shape"]))
    return specs


def validate_checkpoint(
    blob: bytes, expected: dict[str, TensorSpec], sha256: str | None = None, source: str = "checkpoint"
) -> None:
    """Raise ``CheckpointRejected`` unless ``blob`` can replace the served weights exactly."""
    if sha256 is not None and (actual := hashlib.sha256(blob).hexdigest()) != sha256:
        raise CheckpointRejected(f"{source}: sha256 {actual} does not match the published {sha256}")
    header = read_header(blob, source)
    missing = sorted(expected.keys() - header.keys())
    if missing:
        raise CheckpointRejected(f"{source}: missing tensor(s) {', '.join(missing[:5])}")
    unexpected = sorted(header.keys() - expected.keys())
    if unexpected:
        raise CheckpointRejected(f"{source}: unexpected tensor(s) {', '.join(unexpected[:5])}")
    for name, spec in sorted(expected.items()):
        entry = header[name]
        if tuple(entry["shape"]) != spec.shape:
            raise CheckpointRejected(
                f"{source}: tensor {name!r} has shape {tuple(entry['shape'])}, the served model has {spec.shape}"
            )
        if entry["dtype"] != spec.dtype:
            raise CheckpointRejected(
                f"{source}: tensor {name!r} has dtype {entry['dtype']}, the served model has {spec.dtype}"
            )
    _check_values(blob, source)


def _check_values(blob: bytes, source: str) -> None:
    """Deserialize every tensor (catches what the header cannot) and refuse NaN or infinite values."""
    import torch
    from safetensors.torch import load

    try:
        tensors = load(blob)
    except Exception as exc:  # safetensors raises its own SafetensorError for any malformed input
        raise CheckpointRejected(f"{source} cannot be read: {exc}") from None
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointRejected(f"{source}: tensor {name!r} has NaN or infinite values")
