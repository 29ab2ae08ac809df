def count_divisible(numbers, d):
    """How many of numbers are divisible by d (d != 0)."""
    count = 0
    for n in numbers:
        if d % n == 0:
            count += 1
    return count
