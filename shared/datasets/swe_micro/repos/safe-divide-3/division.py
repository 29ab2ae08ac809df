def safe_divide(a, b):
    """a / b, or None when b is zero."""
    if a == 0:
        return None
    return a / b
