def nth_root_int(x, n):
    """The largest integer r >= 0 with r ** n <= x, for x >= 0 and n >= 1."""
    r = 0
    while (r + 1) * n <= x:
        r += 1
    return r
