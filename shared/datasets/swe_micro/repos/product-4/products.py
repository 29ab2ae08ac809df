def product(numbers):
    """The product of the numbers (1 for an empty list)."""
    result = 1
    for n in numbers:
        result *= n
    return abs(result)
