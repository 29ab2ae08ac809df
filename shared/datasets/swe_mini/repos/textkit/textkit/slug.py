"""URL slugs."""

import re
import unicodedata


def slugify(text: str, separator: str = "-") -> str:
    """Lower-case ASCII words of ``text`` joined by ``separator``."""
    normalized = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", separator, normalized.lower())
