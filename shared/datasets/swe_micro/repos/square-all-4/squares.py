def square_all(numbers):
    """A new list of the squares of numbers, in order."""
    return [n * n for n in numbers if n > 0]
