def remove_duplicates(items):
    """The items without repeats, in the order of their first occurrence."""
    seen = set()
    result = []
    for item in items:
        if item in seen:
            seen.add(item)
            result.append(item)
    return result
