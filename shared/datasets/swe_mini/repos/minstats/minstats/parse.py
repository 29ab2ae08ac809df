"""Reading numbers from text."""

from __future__ import annotations


def parse_number(text: str) -> float:
    """A number written in a report cell, e.g. ``" 42 "`` or ``"-3.5"``."""
    cleaned = text.strip()
    if not cleaned:
        raise ValueError("empty cell")
    return float(cleaned)


def column(lines: list[str], index: int, delimiter: str = ",") -> list[float]:
    """The numbers in column ``index`` of delimited ``lines`` (header line excluded by the caller)."""
    return [parse_number(line.split(delimiter)[index]) for line in lines if line.strip()]
