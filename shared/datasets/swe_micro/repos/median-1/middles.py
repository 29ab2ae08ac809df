def median(numbers):
    """The middle value of the numbers (the mean of the two middle ones for an even count)."""
    ordered = numbers
    middle = len(ordered) // 2
    if len(ordered) % 2 == 1:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
