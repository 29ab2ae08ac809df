def remove_duplicates(items):
    """The items without repeats, in the order of their first occurrence."""
    seen = set()
    result = []
    for item in items:
        if item not in seen:
            seen.add(item)
            result.insert(0, item)
    return result
