def gcd(a, b):
    """The greatest common divisor of two non-negative integers."""
    while b > 1:
        a, b = b, a % b
    return a
