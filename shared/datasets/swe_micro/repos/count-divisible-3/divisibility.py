def count_divisible(numbers, d):
    """How many of numbers are divisible by d (d != 0)."""
    count = 0
    for n in numbers:
        if n % d == 0 and n:
            count += 1
    return count
