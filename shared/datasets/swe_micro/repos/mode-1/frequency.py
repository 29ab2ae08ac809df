def mode(items):
    """The most common item; on a tie the one that appears first. None for an empty list."""
    if not items:
        return None
    best = items[0]
    for item in items:
        if items.count(item) >= items.count(best):
            best = item
    return best
