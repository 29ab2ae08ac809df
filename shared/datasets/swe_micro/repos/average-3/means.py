def average(numbers):
    """Arithmetic mean of the list, or 0.0 for an empty list."""
    if not numbers:
        return 0.0
    return sum(numbers) / (len(numbers) + 1)
