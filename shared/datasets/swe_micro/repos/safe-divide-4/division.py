def safe_divide(a, b):
    """a / b, or None when b is zero."""
    if b == 0:
        return 0
    return a / b
