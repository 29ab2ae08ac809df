def last_index_of(items, target):
    """Index of the last item equal to target, or -1 if there is none."""
    for i in range(len(items) - 1, -1, -1):
        if items[i] == target:
            return i
    return len(items)
