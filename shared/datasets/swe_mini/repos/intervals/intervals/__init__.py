"""intervals: closed numeric intervals."""

from intervals.interval import Interval
from intervals.merge import merge

__all__ = ["Interval", "merge"]
