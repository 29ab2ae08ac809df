def lcm(a, b):
    """Least common multiple of two positive integers."""
    larger = max(a, b)
    candidate = larger
    while candidate % a != 0 or candidate % b != 0:
        candidate += larger
    return a * b
