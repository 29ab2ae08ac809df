"""When the inference engine was generating for a run, and how much of a time window that covers.

The gateway stamps each call's record with ``calls.notes["generation_unix_s"] = [start, end]`` (``generation_stamp``):
Unix seconds from the moment it sent the request to the inference engine to the call's last sampled token (queueing
inside vLLM and prefill included: the engine holds the request throughout). The learner reads the stamps back to
measure each step's inference busy fraction (``services/learner/loop.py``); ``busy_seconds`` is the measure:
the length of the union of the intervals inside a window, so time with at least one request in generation
counts once however many requests overlap.

Calls recorded by a gateway older than the stamp have none and do not count.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from shared.models import Call, Rollout

GENERATION_NOTE = "generation_unix_s"
RECORD_DELAY_MARGIN_S = 600.0
"""A call's row is written after its reply (``calls.created_at`` follows its generation's end), on the database's
clock; rows created this long before a window's start are not read for it (clocks of two hosts may differ)."""


def generation_stamp(start_unix: float, end_unix: float) -> list[float]:
    """The note the gateway records: when the call was sent to the engine and when its last token came."""
    return [round(start_unix, 4), round(max(start_unix, end_unix), 4)]


def busy_seconds(intervals: Iterable[tuple[float, float]], start: float, end: float) -> float:
    """Length of the union of ``intervals`` clipped to ``[start, end]``."""
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end)
    total, reach = 0.0, start
    for a, b in clipped:
        if b <= reach:
            continue
        total += b - max(a, reach)
        reach = b
    return total


def generation_intervals(
    session: Session, run_id: str, start: float, end: float
) -> list[tuple[float, float]]:
    """The generation interval of each recorded call of the run that overlaps ``[start, end]`` (Unix seconds)."""
    since = datetime.fromtimestamp(start - RECORD_DELAY_MARGIN_S, UTC)
    stamps: Iterable[list[float]] = session.scalars(
        select(Call.notes[GENERATION_NOTE])
        .join(Rollout, Rollout.id == Call.rollout_id)
        .where(Rollout.run_id == run_id, Call.created_at >= since, Call.notes.has_key(GENERATION_NOTE))
    )
    out = []
    for stamp in stamps:
        a, b = float(stamp[0]), float(stamp[1])
        if b > start and a < end:
            out.append((a, b))
    return out
