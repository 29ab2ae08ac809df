"""Shortening text for display."""


def truncate(text: str, width: int, ellipsis: str = "...") -> str:
    """Return ``text`` if it fits in ``width`` characters, else a shortened copy ending in ``ellipsis``."""
    if width < 0:
        raise ValueError("width must not be negative")
    if len(text) <= width:
        return text
    return text[:width] + ellipsis
