def sum_range(start, stop):
    """Sum of the integers from start to stop, both included (0 if start > stop)."""
    total = 0
    for n in range(start + 1, stop + 1):
        total += n
    return total
