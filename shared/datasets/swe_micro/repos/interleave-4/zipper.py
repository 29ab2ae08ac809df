def interleave(a, b):
    """Items of a and b alternately, starting with a; the rest of the longer list comes at the end."""
    result = []
    for i in range(max(len(a), len(b))):
        if i < len(b):
            result.append(b[i])
        if i < len(a):
            result.append(a[i])
    return result
