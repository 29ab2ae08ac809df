"""The weight swap on one vLLM server: vLLM's RL update flow driven over HTTP (dev mode endpoints).

    /pause?mode=wait → /start_weight_update → /update_weights {"path"} → /finish_weight_update {version}
    → (on_paused_swapped: e.g. publish the served version) → /resume

``mode=wait`` lets in-flight requests finish on the old weights; requests that arrive meanwhile wait for
``/resume``. ``/finish_weight_update`` labels the engine with the new version while nothing runs, so every
token is stamped with the version of the weights that produced it (see ``shared/inference_client.py``).
``/resume`` is always attempted, also when a step fails, so a failed swap never leaves the server paused.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from shared.inference_client import InferenceUnavailable


class SwapFailed(RuntimeError):
    """A step of the swap failed on the server; the message names the step and vLLM's answer."""


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any] | None = None) -> None:
    try:
        async with session.post(url, json=body or {}) as response:
            if response.status >= 400:
                raise SwapFailed(f"{url} answered {response.status}: {(await response.text())[:500]}")
    except aiohttp.ClientError as exc:
        raise InferenceUnavailable(f"{url}: {exc}") from exc


async def init_weight_transfer(session: aiohttp.ClientSession, base_url: str) -> None:
    """Once per server start, before the first swap."""
    await _post(session, f"{base_url}/init_weight_transfer_engine", {"init_info": {}})


async def label_version(session: aiohttp.ClientSession, base_url: str, version: int) -> None:
    """Label the weights being served now (the base model is version 0) without touching them."""
    await _post(session, f"{base_url}/update_weight_version", {"new_version": str(version)})


async def swap_weights(
    session: aiohttp.ClientSession,
    base_url: str,
    weights_path: Path | list[Path],
    version: int,
    on_swapped: Callable[[], Awaitable[None]] | None = None,
) -> float:
    """Load the (already validated) safetensors file(s) at ``weights_path`` as ``version``; return the time the
    server was paused, in milliseconds. ``on_swapped`` runs after the new version is labelled and before
    generation resumes."""
    paths = weights_path if isinstance(weights_path, list) else [weights_path]
    await _post(session, f"{base_url}/pause?mode=wait")
    paused_at = time.perf_counter()
    try:
        await _post(session, f"{base_url}/start_weight_update")
        for path in paths:
            await _post(session, f"{base_url}/update_weights", {"update_info": {"path": str(path)}})
        await _post(session, f"{base_url}/finish_weight_update", {"weight_version": str(version)})
        if on_swapped is not None:
            await on_swapped()
    finally:
        await _post(session, f"{base_url}/resume")
    return (time.perf_counter() - paused_at) * 1000


async def load_adapter(session: aiohttp.ClientSession, base_url: str, name: str, folder: Path) -> None:
    """Load a LoRA adapter (peft files in ``folder``) under ``name``; requests naming it as their model use it.
    Needs ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=1`` (``launch.py``)."""
    await _post(session, f"{base_url}/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})


async def unload_adapter(session: aiohttp.ClientSession, base_url: str, name: str) -> None:
    await _post(session, f"{base_url}/v1/unload_lora_adapter", {"lora_name": name})
