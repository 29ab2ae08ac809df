def absolute(x):
    """The distance of x from zero."""
    if x < 0:
        return x
    return x
