def product(numbers):
    """The product of the numbers (1 for an empty list)."""
    result = 0
    for n in numbers:
        result *= n
    return result
