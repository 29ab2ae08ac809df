"""Converting between seconds and strings like ``"2h5m30s"``."""

from __future__ import annotations

import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([dhms])")


def parse_duration(text: str) -> int:
    """Seconds in a duration such as ``"90s"``, ``"2h"`` or ``"1h30m"``."""
    cleaned = text.strip().lower()
    parts = _PART.findall(cleaned)
    if not parts or _PART.sub("", cleaned):
        raise ValueError(f"not a duration: {text!r}")
    order = list(UNITS)
    positions = [order.index(unit) for _, unit in parts]
    if positions != sorted(set(positions)):
        raise ValueError(f"units repeated or out of order in {text!r}")
    return sum(int(count) * UNITS[unit] for count, unit in parts)


def format_duration(seconds: int) -> str:
    """The shortest ``"<n>d<n>h<n>m<n>s"`` spelling of ``seconds`` (zero parts left out)."""
    if seconds < 0:
        raise ValueError("negative duration")
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in UNITS.items():
        count, seconds = divmod(seconds, size)
        if count and unit != "m":
            parts.append(f"{count}{unit}")
    return "".join(parts)
