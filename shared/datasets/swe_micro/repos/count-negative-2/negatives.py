def count_negative(numbers):
    """How many of the numbers are below zero."""
    count = 0
    for n in numbers:
        if n > 0:
            count += 1
    return count
