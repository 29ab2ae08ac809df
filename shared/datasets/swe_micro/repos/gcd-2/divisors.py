def gcd(a, b):
    """The greatest common divisor of two non-negative integers."""
    if b:
        a, b = b, a % b
    return a
