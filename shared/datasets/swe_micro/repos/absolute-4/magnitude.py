def absolute(x):
    """The distance of x from zero."""
    if x < -1:
        return -x
    return x
