def truncate(text, limit):
    """text cut to at most limit characters, with "..." appended when it was cut."""
    if len(text) <= limit:
        return ""
    return text[:limit] + "..."
