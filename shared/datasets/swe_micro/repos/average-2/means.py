def average(numbers):
    """Arithmetic mean of the list, or 0.0 for an empty list."""
    return sum(numbers) / len(numbers)
