"""Redis streams and channels: the ``groups`` stream and the ``weights`` channel (``weights_channel``). What the
inference pool serves is in ``shared/pool.py``.

Redis carries events only; Postgres can rebuild every stream (``groups`` rows with status ``complete`` and no
``consumed_at``). Concurrency model: any number of graders append to a run's groups stream; one learner per run
reads it through the consumer group ``learner``. A consumer that dies before acking leaves its entries pending;
``GroupStreamConsumer.read`` first claims entries idle longer than ``claim_idle_ms`` (XAUTOCLAIM), so another
consumer picks them up. Acks happen only after the learner's step has committed; the learner skips a group whose
row is already ``consumed`` so a redelivered entry is never trained twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

GROUPS_CONSUMER_GROUP = "learner"


def weights_channel(r: redis.Redis) -> str:
    """Pub/sub ignores Redis db indexes, so the channel name carries the db: two suites on one Redis server
    (a dev stack on db 0, tests on db 11) never see each other's weight events."""
    return f"harnessrl:{r.connection_pool.connection_kwargs.get('db', 0)}:weights"


def groups_stream(run_id: str) -> str:
    return f"harnessrl:groups:{run_id}"


def connect(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


@dataclass(frozen=True)
class GroupEntry:
    entry_id: str
    run_id: str
    group_id: str
    fields: dict[str, str]


def append_group(r: redis.Redis, run_id: str, group_id: str, **fields: Any) -> str:
    """Append a complete group to its run's stream; returns the stream entry id."""
    payload = {"run_id": run_id, "group_id": group_id, **{k: str(v) for k, v in fields.items()}}
    return str(r.xadd(groups_stream(run_id), payload))  # type: ignore[arg-type]


class GroupStreamConsumer:
    """One learner's view of a run's ``groups`` stream (consumer group ``learner``)."""

    def __init__(self, r: redis.Redis, run_id: str, consumer: str, claim_idle_ms: int = 30_000) -> None:
        self.r = r
        self.run_id = run_id
        self.stream = groups_stream(run_id)
        self.consumer = consumer
        self.claim_idle_ms = claim_idle_ms
        self._create_group()

    def _create_group(self) -> None:
        try:
            self.r.xgroup_create(self.stream, GROUPS_CONSUMER_GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def _entries(self, raw: list[Any]) -> list[GroupEntry]:
        out = []
        for entry_id, fields in raw:
            if fields is None:  # deleted while pending
                continue
            out.append(
                GroupEntry(entry_id, fields.get("run_id", self.run_id), fields.get("group_id", ""), fields)
            )
        return out

    def claim_stale(self, count: int = 100) -> list[GroupEntry]:
        """Take over entries another consumer read but never acked within ``claim_idle_ms``."""
        result = self.r.xautoclaim(
            self.stream, GROUPS_CONSUMER_GROUP, self.consumer, self.claim_idle_ms, start_id="0-0", count=count
        )
        return self._entries(result[1])  # type: ignore[index]

    def own_pending(self, count: int = 100) -> list[GroupEntry]:
        """Entries this consumer read before (e.g. before a restart) and has not acked."""
        raw = self.r.xreadgroup(GROUPS_CONSUMER_GROUP, self.consumer, {self.stream: "0"}, count=count)
        return self._entries(raw[0][1]) if raw else []  # type: ignore[index]

    def read_new(self, count: int = 10, block_ms: int | None = 1000) -> list[GroupEntry]:
        """Entries no consumer has read yet, waiting up to ``block_ms``. Entries read before and not acked are not
        delivered again here: a learner keeps them pending on purpose until the step that used them commits, and
        takes them back after a restart with ``own_pending`` and ``claim_stale``. If Redis lost the stream (a
        restart without persistence), the consumer group is recreated and nothing is returned: complete groups
        are appended again from Postgres by whoever completes them."""
        try:
            raw = self.r.xreadgroup(
                GROUPS_CONSUMER_GROUP, self.consumer, {self.stream: ">"}, count=count, block=block_ms
            )
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc) and "UNBLOCKED" not in str(exc):
                raise
            self._create_group()
            return []
        return self._entries(raw[0][1]) if raw else []  # type: ignore[index]

    def ack(self, entry_ids: list[str]) -> int:
        if not entry_ids:
            return 0
        return int(self.r.xack(self.stream, GROUPS_CONSUMER_GROUP, *entry_ids))  # type: ignore[arg-type]


def publish_weights(r: redis.Redis, run_id: str, version: int, object_key: str) -> int:
    """Tell inference services a new policy version is in the object store."""
    message = json.dumps({"run_id": run_id, "version": version, "object_key": object_key})
    return int(r.publish(weights_channel(r), message))  # type: ignore[arg-type]


REBASE_FIELD = "rebase"


def publish_rebase(r: redis.Redis, run_id: str) -> int:
    """Ask inference services to serve the base weights as version 0 of ``run_id``, the run about to hold the
    pool (``Settings.pool_exclusive``); on the same channel as new versions, so it is applied in order."""
    return int(r.publish(weights_channel(r), json.dumps({REBASE_FIELD: run_id})))  # type: ignore[arg-type]


def rebase_request(payload: dict[str, object]) -> str | None:
    """The run a weights-channel message asks the pool to rebase to, or None for a published version."""
    run_id = payload.get(REBASE_FIELD)
    return str(run_id) if run_id else None
