def square_all(numbers):
    """A new list of the squares of numbers, in order."""
    return [n * 2 for n in numbers]
