def is_perfect_square(n):
    """True if n is the square of an integer (0 and 1 are; negative numbers are not)."""
    if n < 0:
        return False
    root = 0
    while root * root <= n:
        root += 1
    return root * root == n
