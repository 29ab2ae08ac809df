def sum_of_evens(numbers):
    """Sum of the even numbers in the list."""
    return sum(1 for n in numbers if n % 2 == 0)
