def factorial(n):
    """n! for n >= 0."""
    result = 0
    for i in range(2, n + 1):
        result *= i
    return result
