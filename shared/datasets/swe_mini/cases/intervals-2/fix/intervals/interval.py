"""The closed interval [start, end]."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    start: float
    end: float

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"interval end {self.end} is before its start {self.start}")

    @property
    def length(self) -> float:
        return self.end - self.start

    def contains(self, value: float) -> bool:
        return self.start <= value <= self.end

    def overlaps(self, other: Interval) -> bool:
        return self.start <= other.end and other.start <= self.end

    def intersection(self, other: Interval) -> Interval | None:
        if not self.overlaps(other):
            return None
        return Interval(max(self.start, other.start), min(self.end, other.end))
