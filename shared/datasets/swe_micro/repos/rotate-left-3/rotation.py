def rotate_left(items, steps):
    """items rotated left by steps positions (steps may exceed the length)."""
    steps = steps % len(items)
    return items[steps:] + items[:steps]
