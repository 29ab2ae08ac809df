"""What the gateway and the runner agree on in Redis about a rollout's capture: its chain tips, the binding, the
calls replied to but not yet recorded, the gateway processes that are alive, and the flush barrier.

The gateway replies before it records (``services/gateway/recorder.py`` writes behind); the runner must not end a
rollout before every call is recorded, and must not grade a rollout whose gateway died with records unwritten.

Layout (all keys of one rollout share the hash tag ``{<rollout key>}``, so the gateway's commit script touches one
slot; ``ROLLOUT_TTL_S`` expires what a crashed runner never released):

| key | type | what |
|---|---|---|
| ``harnessrl:gw:{K}:r`` | hash | ``bind`` (the ``Binding`` as JSON, written by the runner when it starts an attempt), ``closed`` (set by the barrier: no more calls), ``seq``, and per chain ``t:<chain>`` / ``v:<chain>`` / ``s:<chain>`` / ``rt:<chain>`` (the tip, its version, its commit order, its retemplate cut; ``services/gateway/tips.py``) |
| ``harnessrl:gw:{K}:ids:<chain>`` | string | the chain's token ids so far, int32 little-endian, append-only |
| ``harnessrl:gw:{K}:pending`` | hash | call id → the gateway process (owner) that replied to it and is recording it; ``!<reason>`` once that owner gave up on it; ``~<token>`` → owner while a call is being served, before it commits |
| ``harnessrl:gw:lease:<owner>`` | string | present while that gateway process is alive (refreshed every ``LEASE_REFRESH_S``, expires after ``LEASE_TTL_S``) |

Invariants:
- A call enters ``pending`` in the same atomic script that advances its chain tip, so a call some harness could
  have seen is pending until its owner has both committed its rows and finished writing its reply; only then the
  owner removes it.
- ``flush`` first sets ``closed`` (the commit script refuses to advance a closed rollout's tips), then waits for
  ``pending`` to drain. An entry whose owner's lease is gone, or that its owner marked failed, is a lost record:
  the runner fails the attempt as a harness error and retries it under its retry budget (a new rollout key; the
  gateway's writer drops rows of stale keys), so no rollout is graded on a trajectory with a missing call.
- A call being served is marked ``~<token>`` until it commits (the commit script removes the mark) or fails. A mark
  left by a dead owner means a gateway process died under one of the harness's calls: nothing of that call was
  recorded or replied, so the trajectory is whole, but if the harness then failed, the failure is the gateway's
  (``interrupted``) and the runner runs the attempt again instead of grading it. Marks of live owners are waited
  for at most ``LEASE_TTL_S`` (long enough for a dead owner's lease to run out); after ``closed`` they can no
  longer commit.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

ROLLOUT_TTL_S = 24 * 3600
RELEASED_TTL_S = 3600
BINDING_FRESH_S = 30.0
LEASE_TTL_S = 6.0
LEASE_REFRESH_S = 1.5
FAILED_PREFIX = "!"
SERVING_PREFIX = "~"
FIELD_BIND = "bind"
FIELD_CLOSED = "closed"
FIELD_SEQ = "seq"


def _tag(rollout_key: str) -> str:
    return f"harnessrl:gw:{{{rollout_key}}}"


def state_key(rollout_key: str) -> str:
    return f"{_tag(rollout_key)}:r"


def ids_key(rollout_key: str, chain_id: int) -> str:
    return f"{_tag(rollout_key)}:ids:{chain_id}"


def pending_key(rollout_key: str) -> str:
    return f"{_tag(rollout_key)}:pending"


def lease_key(owner: str) -> str:
    return f"harnessrl:gw:lease:{owner}"


def tip_field(chain_id: int) -> str:
    return f"t:{chain_id}"


def chain_of_tip_field(name: str) -> int | None:
    """The chain id of a ``t:<chain>`` field name, else None."""
    return int(name[2:]) if name.startswith("t:") else None


@dataclass(frozen=True)
class Binding:
    """Which rollout a key serves, and the run's sampling settings that override the harness's request."""

    rollout_id: str
    run_id: str
    harness: str
    sampling: dict[str, Any] = field(default_factory=dict)
    checked_at: float = 0.0
    """When someone last read the rollout's row and found it running (epoch seconds); the gateway re-reads it
    when this is older than ``BINDING_FRESH_S``."""
    lora: bool = False
    """The run trains a LoRA adapter (its calls sample with the run's served adapter)."""
    seed: int | None = None
    """The rollout's sampling seed (``rollouts.sampling_seed``; ``shared/sampling_seed.py``), None = unseeded."""
    teacher: dict[str, Any] | None = None
    """The run config's ``teacher`` section (``shared/run_config.py: TeacherConfig``), None = the policy answers.
    Redis is the gateway's own state store; nothing in the sandbox reads it."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Binding:
        data = json.loads(text)
        return cls(
            data["rollout_id"],
            data["run_id"],
            data["harness"],
            data.get("sampling") or {},
            float(data.get("checked_at", 0.0)),
            bool(data.get("lora", False)),
            data.get("seed"),
            data.get("teacher"),
        )


def open_rollout(r: redis.Redis, rollout_key: str, binding: Binding) -> None:
    """Register a new attempt's key (the runner, before the harness starts): its first call binds without a
    database query."""
    pipe = r.pipeline()
    pipe.hset(state_key(rollout_key), FIELD_BIND, binding.to_json())
    pipe.expire(state_key(rollout_key), ROLLOUT_TTL_S)
    pipe.execute()


def close_rollout(r: redis.Redis, rollout_key: str) -> None:
    """No more calls on this key: binding answers 401 and no chain tip advances any more."""
    pipe = r.pipeline()
    pipe.hset(state_key(rollout_key), FIELD_CLOSED, "1")
    pipe.expire(state_key(rollout_key), ROLLOUT_TTL_S)
    pipe.execute()


@dataclass
class FlushResult:
    """What the barrier found: ``lost`` maps call ids whose record will never land to why; ``interrupted`` lists
    calls a gateway process died while serving (not recorded, not replied)."""

    lost: dict[str, str]
    waited_s: float
    interrupted: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.lost

    @property
    def error(self) -> str:
        reasons = sorted(set(self.lost.values()))
        return (
            f"the gateway lost the records of {len(self.lost)} call(s) of this rollout "
            f"({'; '.join(reasons)}); the attempt is not graded"
        )


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def flush(r: redis.Redis, rollout_key: str, timeout_s: float = 60.0, poll_s: float = 0.02) -> FlushResult:
    """The runner's barrier: close the key, then wait until every call replied to on it is recorded."""
    close_rollout(r, rollout_key)
    return wait_recorded(r, rollout_key, timeout_s, poll_s)


def wait_recorded(
    r: redis.Redis, rollout_key: str, timeout_s: float = 60.0, poll_s: float = 0.02
) -> FlushResult:
    """Wait until no call of the key is pending (see the module docstring); the key stays open.

    Returns at once when nothing is pending; a pending call whose owner died or gave up ends the wait with that
    call in ``lost``; after ``timeout_s`` whatever is still pending is lost."""
    started = time.monotonic()
    while True:
        entries = {_decode(k): _decode(v) for k, v in r.hgetall(pending_key(rollout_key)).items()}  # type: ignore[union-attr]
        owners = sorted({o for o in entries.values() if not o.startswith(FAILED_PREFIX)})
        dead: set[str] = set()
        if owners:
            pipe = r.pipeline()
            for owner in owners:
                pipe.exists(lease_key(owner))
            dead = {owner for owner, alive in zip(owners, pipe.execute(), strict=True) if not alive}
        interrupted = {
            call: f"gateway process {owner} died while serving a call"
            for call, owner in entries.items()
            if call.startswith(SERVING_PREFIX) and owner in dead
        }
        pending = {c: o for c, o in entries.items() if not c.startswith(SERVING_PREFIX)}
        lost = {
            call: f"the gateway gave up: {owner[len(FAILED_PREFIX) :]}"
            if owner.startswith(FAILED_PREFIX)
            else f"gateway process {owner} died before recording it"
            for call, owner in pending.items()
            if owner.startswith(FAILED_PREFIX) or owner in dead
        }
        # A call still being served when the harness has gone either ends soon or its process is dead and its
        # lease runs out within LEASE_TTL_S: wait that long for the truth, no longer (it cannot commit any more).
        serving = [c for c, o in entries.items() if c.startswith(SERVING_PREFIX) and o not in dead]
        settling = serving and time.monotonic() - started < LEASE_TTL_S + 1
        if lost or not (pending or settling):
            return FlushResult(lost, time.monotonic() - started, interrupted)
        if time.monotonic() - started > timeout_s:
            return FlushResult(
                {call: f"not recorded within {timeout_s:.0f} s" for call in pending},
                time.monotonic() - started,
                interrupted,
            )
        time.sleep(poll_s)


def release(r: redis.Redis, rollout_key: str) -> None:
    """Drop a finished key's tips and token ids (the closed marker stays a while, so stragglers still get 401)."""
    state = state_key(rollout_key)
    chains = [c for name in r.hkeys(state) if (c := chain_of_tip_field(_decode(name))) is not None]  # type: ignore[union-attr]
    pipe = r.pipeline()
    for chain_id in chains:
        pipe.delete(ids_key(rollout_key, chain_id))
    pipe.delete(pending_key(rollout_key))
    pipe.delete(state)
    pipe.hset(state, FIELD_CLOSED, "1")
    pipe.expire(state, RELEASED_TTL_S)
    pipe.execute()
