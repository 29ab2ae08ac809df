"""Code that runs inside vLLM's worker: the ``safetensors_file`` weight-transfer backend and the worker extension.

vLLM imports this module in its worker process because the launch names ``WeightUpdateExtension`` with
``--worker-extension-cls``; importing it registers the backend that ``--weight-transfer-config
'{"backend": "safetensors_file"}'`` selects. The HTTP choreography is vLLM's own RL flow (dev mode):

    POST /pause?mode=wait → POST /start_weight_update → POST /update_weights {"update_info": {"path": ...}}
    → POST /finish_weight_update {"weight_version": "<n>"} → POST /resume

The backend reads a safetensors file (HF parameter names, may be a subset) from a path on this machine and
feeds it to ``model.load_weights`` inside a layerwise reload, the only safe way on CPU: vLLM's CPU linear
layers prepack their weights and swap ``layer.weight`` for an empty tensor, so a bare ``load_weights`` outside
the reload window corrupts the model. Callers validate the file before step 2 (see ``checkpoint.py``): a
failure inside the window would leave a half-loaded model.

Tied embeddings on CPU: the layerwise reload re-processes only layers that receive weights. A tied
``lm_head`` receives none of its own, so its prepacked copy (``cpu_linear``) would keep the old embedding;
``repack_tied_lm_head`` rebuilds it after every reload.

On GPUs the same choreography runs with vLLM's ``nccl`` backend instead (the learner broadcasts tensors to
the workers over NCCL after ``/init_weight_transfer_engine``; see docs/design.md#weight-updates); this
file-based backend also works there, since it only uses device-agnostic loading.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import torch
from safetensors.torch import load_file
from vllm.distributed.weight_transfer.base import (
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)
from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

BACKEND_NAME = "safetensors_file"


def repack_tied_lm_head(model: torch.nn.Module, config: Any) -> bool:
    """Rebuild a tied lm_head's prepacked CPU weight from the (reloaded) embedding; True if it did."""
    lm_head = getattr(model, "lm_head", None)
    if not getattr(config, "tie_word_embeddings", False) or not isinstance(lm_head, torch.nn.Module):
        return False
    if not hasattr(lm_head, "cpu_linear"):  # not a CPU-prepacked layer (e.g. on GPU): nothing is stale
        return False
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    dispatch_cpu_unquantized_gemm(lm_head, remove_weight=False)
    return True


@dataclass
class FileInitInfo(WeightTransferInitInfo):
    """Nothing to set up: the file lives on this machine."""


@dataclass
class FileUpdateInfo(WeightTransferUpdateInfo):
    path: str
    """Absolute path of a safetensors file with HF parameter names."""


class SafetensorsFileEngine(WeightTransferEngine[FileInitInfo, FileUpdateInfo]):
    """Loads a safetensors file from local disk through vLLM's layerwise reload."""

    init_info_cls = FileInitInfo
    update_info_cls = FileUpdateInfo

    def init_transfer_engine(self, init_info: FileInitInfo) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base method ends with torch.accelerator.synchronize(), which has no CPU backend; loading here
        # is synchronous anyway.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: FileUpdateInfo) -> None:
        state = load_file(update_info.path, device="cpu")
        self.model.load_weights(weights=iter(state.items()))  # type: ignore[operator]

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)
        repack_tied_lm_head(self.model, self.model_config.hf_config)


# ValueError = already registered: this module was imported twice in one process.
with contextlib.suppress(ValueError):
    WeightTransferEngineFactory.register_engine(BACKEND_NAME, SafetensorsFileEngine)


class WeightUpdateExtension:
    """Mixed into vLLM's worker (``--worker-extension-cls``); methods are called via ``POST /collective_rpc``."""

    def reload_weights_from_dir(self, weights_path: str) -> dict[str, float]:
        """Fallback to the RL flow: vLLM's own layerwise reload from a checkpoint directory, plus the
        tied-lm_head re-pack. Returns the time it took."""
        started = time.perf_counter()
        self.reload_weights(weights_path=weights_path)  # type: ignore[attr-defined]
        model = self.model_runner.get_model()  # type: ignore[attr-defined]
        repack_tied_lm_head(model, self.model_runner.model_config.hf_config)  # type: ignore[attr-defined]
        return {"reload_ms": (time.perf_counter() - started) * 1000}
