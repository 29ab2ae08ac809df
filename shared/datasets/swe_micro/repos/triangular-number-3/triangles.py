def triangular_number(n):
    """1 + 2 + ... + n for n >= 0 (0 for n == 0)."""
    total = 0
    for i in range(1, n + 1):
        total += n
    return total
