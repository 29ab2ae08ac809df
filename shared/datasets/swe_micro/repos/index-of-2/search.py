def index_of(items, target):
    """Index of the first item equal to target, or -1 if there is none."""
    for i in range(1, len(items)):
        if items[i] == target:
            return i
    return -1
