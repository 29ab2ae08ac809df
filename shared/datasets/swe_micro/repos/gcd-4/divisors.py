def gcd(a, b):
    """The greatest common divisor of two non-negative integers."""
    while b:
        a, b = b, b % a
    return a
