def sign(x):
    """-1 for a negative number, 1 for a positive one, 0 for zero."""
    if x > 0:
        return 1
    if x <= 0:
        return -1
    return 0
