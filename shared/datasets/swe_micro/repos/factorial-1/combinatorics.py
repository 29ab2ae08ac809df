def factorial(n):
    """n! for n >= 0."""
    result = 1
    for i in range(2, n):
        result *= i
    return result
