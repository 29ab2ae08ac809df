"""Infrastructure incidents: the evidence the runner uses to tell an infrastructure failure from the model's.

Two kinds, both in Redis (events only: the runner copies what it used into the rollout's attempt report):

- **Per-rollout incidents** (``incidents_key``): the gateway appends one whenever it answers a bound request
  with an error that is not the caller's fault (inference unreachable, overloaded or failing, a call it could not
  record: every 5xx/529), or refuses a call because the inference pool does not serve the rollout's policy.
  The runner reads and clears them when the attempt ends.
- **Service boots** (``BOOTS_KEY``, a hash service → count): the gateway and the inference service bump their
  counter when they start. The runner reads the counters when an attempt starts and ends; a change means a
  process that served the attempt died or restarted under it (a connection reset the harness saw).

Nothing here is readable or writable from inside a sandbox, so an agent cannot fake an incident to turn its
own failure into a retry.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

import redis
import redis.asyncio as aioredis

BOOTS_KEY = "harnessrl:boots"
INCIDENT_TTL_S = 7 * 24 * 3600
BOOTED_SERVICES = ("gateway", "inference")


def incidents_key(rollout_id: str) -> str:
    return f"harnessrl:incidents:{rollout_id}"


@dataclass(frozen=True)
class Incident:
    """One infrastructure failure seen while serving a rollout. ``cause`` is a short code (the rollout's
    ``outcome_reason`` when it decides the outcome), ``detail`` the message the harness was given."""

    cause: str
    detail: str
    at: float

    def encode(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def decode(cls, raw: str | bytes) -> Incident:
        try:
            data = json.loads(raw)
            return cls(str(data["cause"]), str(data.get("detail", "")), float(data.get("at", 0.0)))
        except (ValueError, KeyError, TypeError):
            return cls("unreadable_incident", str(raw)[:200], 0.0)


def new_incident(cause: str, detail: str) -> Incident:
    return Incident(cause, detail[:1000], time.time())


def record_incident(r: redis.Redis, rollout_id: str, incident: Incident) -> None:
    key = incidents_key(rollout_id)
    pipe = r.pipeline()
    pipe.rpush(key, incident.encode())
    pipe.expire(key, INCIDENT_TTL_S)
    pipe.execute()


def take_incidents(r: redis.Redis, rollout_id: str) -> list[Incident]:
    """The rollout's incidents, oldest first, removed from Redis."""
    key = incidents_key(rollout_id)
    pipe = r.pipeline()
    pipe.lrange(key, 0, -1)
    pipe.delete(key)
    raw, _ = pipe.execute()
    return [Incident.decode(item) for item in raw]


def note_boot(r: redis.Redis, service: str) -> int:
    """Count one start of ``service`` (call it before the service takes requests)."""
    return int(r.hincrby(BOOTS_KEY, service, 1))  # type: ignore[arg-type]


def boot_counts(r: redis.Redis) -> dict[str, int]:
    raw = r.hgetall(BOOTS_KEY)
    return {str(k): int(v) for k, v in raw.items()}  # type: ignore[union-attr]


def restarted_services(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """Services that started between two ``boot_counts`` readings."""
    return [s for s in BOOTED_SERVICES if after.get(s, 0) != before.get(s, 0)]


async def record_incident_async(r: aioredis.Redis, rollout_id: str, incident: Incident) -> None:
    """``record_incident`` for asyncio services (the gateway)."""
    key = incidents_key(rollout_id)
    async with r.pipeline() as pipe:
        pipe.rpush(key, incident.encode())
        pipe.expire(key, INCIDENT_TTL_S)
        await pipe.execute()


async def note_boot_async(r: aioredis.Redis, service: str) -> int:
    return int(await r.hincrby(BOOTS_KEY, service, 1))  # type: ignore[misc]
