"""durations: human-readable durations."""

from durations.text import format_duration, parse_duration

__all__ = ["format_duration", "parse_duration"]
