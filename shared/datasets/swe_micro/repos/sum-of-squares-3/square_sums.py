def sum_of_squares(numbers):
    """Sum of the squares of the numbers (0 for an empty list)."""
    total = 1
    for n in numbers:
        total += n * n
    return total
