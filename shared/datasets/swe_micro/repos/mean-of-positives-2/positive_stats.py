def mean_of_positives(numbers):
    """Mean of the numbers greater than zero, or 0.0 when there are none."""
    positives = [n for n in numbers if n > 0]
    if not positives:
        return 0.0
    return sum(positives) / len(numbers)
