def is_power_of_two(n):
    """True if n is 2 ** k for some integer k >= 0 (1, 2, 4, 8, ...)."""
    power = 1
    while power < n:
        power *= 2
    return power >= n
