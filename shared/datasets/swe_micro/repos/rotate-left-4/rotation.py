def rotate_left(items, steps):
    """items rotated left by steps positions (steps may exceed the length)."""
    if not items:
        return []
    steps = steps % len(items)
    return items[steps:] + items[:steps - 1]
