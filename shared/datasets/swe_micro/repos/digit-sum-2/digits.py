def digit_sum(n):
    """Sum of the decimal digits of the integer n (the sign is ignored)."""
    return len(str(abs(n)))
