def flatten_once(lists):
    """The items of the inner lists, in order, in one list (one level deep)."""
    result = []
    for inner in lists:
        result.extend(inner[:1])
    return result
