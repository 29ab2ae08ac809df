"""Group completion: append a GRPO group to its run's ``groups`` stream exactly once.

A group is complete when each of its ``size`` rollouts is terminal (``shared/statuses.py: ROLLOUT_TERMINAL``:
graded, failed for good, or cancelled). A group holding an infrastructure failure or a cancelled rollout is
appended too: the learner decides it (sets it aside with the reason), so its step is not left waiting. Any grader may finish the last rollout of a group, several at the same moment, and any of them
may crash at any point, so the append is guarded twice:

1. **Row lock.** ``SELECT ... FOR UPDATE`` on the group row serializes the checkers of one group. Each grader
   commits its own reward *before* it checks, so whichever checker runs last sees every rollout terminal; a
   checker that finds the group already ``complete`` does nothing.
2. **Atomic append-once in Redis.** The stream entry is added by a Lua script that first looks for a marker
   key of the group (``harnessrl:group_appended:<group_id>``): if present it returns the recorded entry id,
   otherwise it XADDs and sets the marker to the new id, atomically. The Postgres transaction then records
   ``status = complete`` and ``stream_entry_id``.

Crash windows and what happens:
- before the XADD: nothing was appended; the redelivered grading message (or the next grader) checks again.
- after the XADD, before the Postgres commit: the row still says ``running``; the next check re-runs the
  script, which finds the marker and returns the *same* entry id instead of appending again, and commits it.
- after the commit: the group is ``complete``; every later check is a no-op.
So the stream holds exactly one entry per group, and the row ends up naming it.

An eval's group (``runs.kind = 'eval'``) is marked ``complete`` without any stream entry: no learner ever reads
it, so evaluation rollouts can never reach a GRPO batch. (The marker outlives any
plausible redelivery: ``MARKER_TTL_S``. If Redis itself loses data, Postgres is the source of truth: complete
groups without ``consumed_at`` can be re-published, see ``shared/events.py``.)
"""

from __future__ import annotations

from datetime import UTC, datetime

import redis
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from shared.db import session_scope
from shared.events import groups_stream
from shared.models import Group, Reward, Rollout, Run
from shared.statuses import ROLLOUT_TERMINAL, GroupStatus, RolloutStatus, RunKind

MARKER_TTL_S = 14 * 24 * 3600

# KEYS[1] = marker, KEYS[2] = stream; ARGV[1] = ttl, ARGV[2..] = field, value pairs.
_APPEND_ONCE = """
local existing = redis.call('GET', KEYS[1])
if existing then return existing end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
local id = redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('SET', KEYS[1], id, 'EX', tonumber(ARGV[1]))
return id
"""


def marker_key(group_id: str) -> str:
    return f"harnessrl:group_appended:{group_id}"


def append_group_once(r: redis.Redis, run_id: str, group_id: str, fields: dict[str, str]) -> str:
    """XADD the group to its run's stream unless it was appended before; returns the (first) entry id."""
    payload = {"run_id": run_id, "group_id": group_id, **fields}
    flat = [item for pair in payload.items() for item in pair]
    entry_id = r.eval(_APPEND_ONCE, 2, marker_key(group_id), groups_stream(run_id), MARKER_TTL_S, *flat)
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def complete_group_if_done(db: sessionmaker[Session], r: redis.Redis, group_id: str) -> str | None:
    """Append the group to the stream if all its rollouts are terminal; the entry id if this call completed it."""
    with session_scope(db) as session:
        group = session.scalar(select(Group).where(Group.id == group_id).with_for_update())
        if group is None or group.status in (GroupStatus.COMPLETE, GroupStatus.CONSUMED, GroupStatus.FAILED):
            return None
        statuses = session.execute(
            select(Rollout.status, func.count()).where(Rollout.group_id == group_id).group_by(Rollout.status)
        ).all()
        counts = {status: int(n) for status, n in statuses}
        terminal = sum(counts.get(s, 0) for s in ROLLOUT_TERMINAL)
        if terminal < group.size or any(s not in ROLLOUT_TERMINAL for s in counts):
            return None
        if session.scalar(select(Run.kind).where(Run.id == group.run_id)) == RunKind.EVAL:
            group.status = GroupStatus.COMPLETE
            group.completed_at = datetime.now(UTC)
            return None
        rewards = session.scalars(
            select(Reward.reward)
            .join(Rollout, Rollout.id == Reward.rollout_id)
            .where(Rollout.group_id == group_id)
        ).all()
        fields = {
            "task_id": group.task_id,
            "step": str(group.step),
            "size": str(group.size),
            "policy_version": str(group.policy_version),
            "graded": str(counts.get(RolloutStatus.GRADED, 0)),
            "failed": str(counts.get(RolloutStatus.FAILED, 0) + counts.get(RolloutStatus.CANCELLED, 0)),
            "reward_mean": str(sum(rewards) / len(rewards)) if rewards else "",
        }
        entry_id = append_group_once(r, group.run_id, group.id, fields)
        group.status = GroupStatus.COMPLETE
        group.stream_entry_id = entry_id
        group.completed_at = datetime.now(UTC)
        return entry_id
