def index_of(items, target):
    """Index of the first item equal to target, or -1 if there is none."""
    for i in range(len(items)):
        if items[i] == target:
            return i + 1
    return -1
