"""The inference pool's served state: which run's policy, at which version, the engine serves right now.

One Redis hash (``SERVED_KEY``), written only by the inference updater:
- ``starting`` when an inference process starts (before vLLM runs: a restarted engine holds the base weights,
  not the policy the hash named), or while it rebases to another run;
- ``ready`` with ``run_id`` and ``version`` once the engine serves them. The updater writes it inside the swap's
  pause, so when generation resumes Redis already names the version being served. ``run_id`` is empty for the
  base model served before any run owned the pool.

Readers: the gateway refuses a call (503, recorded as an incident) while the pool is not ``ready``; the runner
starts no attempt until it is; tests and the CLI show it. With no hash at all (no updater: a bare vLLM, a
scripted policy) nobody manages the pool and every reader lets calls through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

SERVED_KEY = "harnessrl:pool:served"
READY, STARTING = "ready", "starting"


@dataclass(frozen=True)
class Served:
    state: str
    run_id: str
    version: int
    served_by: str

    @property
    def ready(self) -> bool:
        return self.state == READY

    @classmethod
    def from_hash(cls, fields: dict[str, Any]) -> Served | None:
        if not fields:
            return None
        return cls(
            state=str(fields.get("state", READY)),
            run_id=str(fields.get("run_id", "")),
            version=int(fields.get("version", 0)),
            served_by=str(fields.get("served_by", "")),
        )

    def describe(self) -> str:
        if not self.ready:
            return f"the inference pool is {self.state}"
        whose = f"run {self.run_id}" if self.run_id else "the base model"
        return f"the inference pool serves {whose} at policy version {self.version}"


def set_served(r: redis.Redis, run_id: str, version: int, served_by: str = "") -> None:
    r.hset(SERVED_KEY, mapping={"state": READY, "run_id": run_id, "version": version, "served_by": served_by})


def mark_starting(r: redis.Redis, served_by: str = "") -> None:
    r.hset(SERVED_KEY, mapping={"state": STARTING, "served_by": served_by})


def get_served(r: redis.Redis) -> Served | None:
    return Served.from_hash(r.hgetall(SERVED_KEY))  # type: ignore[arg-type]


def get_policy_version(r: redis.Redis) -> int | None:
    """The version the pool serves, or None while it is not ready (or unmanaged)."""
    served = get_served(r)
    return served.version if served is not None and served.ready else None
