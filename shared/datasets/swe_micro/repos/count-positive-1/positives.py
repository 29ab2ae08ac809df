def count_positive(numbers):
    """How many numbers are greater than zero."""
    count = 0
    for n in numbers:
        if n >= 0:
            count += 1
    return count
