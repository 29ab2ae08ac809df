def power(base, exponent):
    """base raised to a non-negative integer exponent."""
    result = base
    for _ in range(exponent):
        result *= base
    return result
