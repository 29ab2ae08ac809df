"""minstats: descriptive statistics for small columns of numbers."""

from minstats.parse import column, parse_number
from minstats.summary import mean, median

__all__ = ["column", "mean", "median", "parse_number"]
