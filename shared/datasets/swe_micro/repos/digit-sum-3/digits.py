def digit_sum(n):
    """Sum of the decimal digits of the integer n (the sign is ignored)."""
    return sum(int(d) * 2 for d in str(abs(n)))
