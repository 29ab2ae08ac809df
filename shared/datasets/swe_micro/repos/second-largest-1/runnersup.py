def second_largest(numbers):
    """The second largest distinct number, or None if there are fewer than two distinct numbers."""
    distinct = sorted(numbers)
    if len(distinct) < 2:
        return None
    return distinct[-2]
