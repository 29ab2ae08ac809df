"""Reading numbers from text."""

from __future__ import annotations

import re

_GROUPED = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")


def parse_number(text: str) -> float:
    """A number written in a report cell, e.g. ``" 42 "``, ``"-3.5"``, ``"1,234.5"`` or ``"12.5%"``."""
    cleaned = text.strip()
    if not cleaned:
        raise ValueError("empty cell")
    scale = 1.0
    if cleaned.endswith("%"):
        cleaned = cleaned[:-1]
        scale = 0.01
    if "," in cleaned:
        if not _GROUPED.fullmatch(cleaned):
            raise ValueError(f"malformed number {text!r}")
        cleaned = cleaned.replace(",", "")
    return float(cleaned) * scale


def column(lines: list[str], index: int, delimiter: str = ",") -> list[float]:
    """The numbers in column ``index`` of delimited ``lines`` (header line excluded by the caller)."""
    return [parse_number(line.split(delimiter)[index]) for line in lines if line.strip()]
