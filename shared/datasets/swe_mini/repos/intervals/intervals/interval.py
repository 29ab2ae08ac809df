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
        return self.contains(other.start) or self.contains(other.end)
