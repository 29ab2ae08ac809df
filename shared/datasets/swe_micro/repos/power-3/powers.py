def power(base, exponent):
    """base raised to a non-negative integer exponent."""
    result = 1
    for _ in range(exponent):
        result += base
    return result
