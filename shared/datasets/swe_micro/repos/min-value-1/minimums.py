def min_value(numbers):
    """The smallest number of the list, or None for an empty list."""
    if not numbers:
        return None
    best = numbers[0]
    for n in numbers[1:]:
        if n > best:
            best = n
    return best
