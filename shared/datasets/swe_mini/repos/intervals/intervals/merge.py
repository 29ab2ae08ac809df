"""Merging overlapping intervals."""

from __future__ import annotations

from collections.abc import Iterable

from intervals.interval import Interval


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, non-overlapping intervals covering the same points as ``intervals``."""
    result: list[Interval] = []
    for current in sorted(intervals):
        if result and current.start < result[-1].end:
            last = result.pop()
            current = Interval(last.start, max(last.end, current.end))
        result.append(current)
    return result
