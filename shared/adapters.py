"""LoRA adapters of a run: adapter names, object keys, the served adapter. (The settings are the ``lora`` section
of the run's config, ``shared.run_config.LoraConfig``.)

Who uses it: the learner trains and publishes an adapter per version (``services/learner``), the inference
updater loads each into vLLM under its name (``services/inference/updater.py``), the gateway samples a LoRA run's
calls with the run's newest served adapter and records the version the name carries (``services/gateway``).

Invariant that makes attribution exact: an adapter name ``<run>-v<version>`` is loaded once and never reloaded
in place, so a response that vLLM produced under that name was produced by exactly that version's weights.
"""

from __future__ import annotations

import re
from typing import Any

import redis

_NAME = re.compile(r"^(?P<run>.+)-v(?P<version>\d+)$")


def adapter_name(run_id: str, version: int) -> str:
    return f"{run_id}-v{version}"


def adapter_version(name: str) -> int | None:
    """The version an adapter name carries (None if ``name`` is not an adapter name)."""
    match = _NAME.match(name)
    return int(match["version"]) if match else None


def adapter_key(run_id: str, version: int) -> str:
    """The adapter's safetensors object; ``adapter_config.json`` lies beside it."""
    return f"adapters/{run_id}/{version}/adapter_model.safetensors"


def adapter_config_key(weights_key: str) -> str:
    return weights_key.rsplit("/", 1)[0] + "/adapter_config.json"


def is_adapter_key(object_key: str) -> bool:
    return object_key.startswith("adapters/")


def served_adapter_key(r: Any, run_id: str) -> str:
    """Redis key of the run's served adapter name (sync or asyncio client alike)."""
    return f"harnessrl:{r.connection_pool.connection_kwargs.get('db', 0)}:adapter:{run_id}"


def set_served_adapter(r: redis.Redis, run_id: str, name: str) -> None:
    """Called by the updater once vLLM serves ``name``: the gateway samples the run's next calls with it."""
    r.set(served_adapter_key(r, run_id), name)


def get_served_adapter(r: redis.Redis, run_id: str) -> str | None:
    value = r.get(served_adapter_key(r, run_id))
    return value.decode() if isinstance(value, bytes) else value
