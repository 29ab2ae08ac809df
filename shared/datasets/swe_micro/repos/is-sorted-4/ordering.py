def is_sorted(items):
    """True if every item is less than or equal to the next one."""
    for i in range(len(items) - 1):
        if items[i] > items[i + 1]:
            return False
    return False
