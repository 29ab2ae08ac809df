def flatten_once(lists):
    """The items of the inner lists, in order, in one list (one level deep)."""
    result = []
    for inner in lists[1:]:
        result.extend(inner)
    return result
