def invert_dict(mapping):
    """Swap keys and values; when a value repeats, the first key with it wins."""
    inverted = {}
    for key, value in mapping.items():
        if value in inverted:
            inverted[value] = key
    return inverted
