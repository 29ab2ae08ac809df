def invert_dict(mapping):
    """Swap keys and values; when a value repeats, the first key with it wins."""
    inverted = {}
    for key, value in mapping.items():
        if value not in inverted:
            inverted[key] = value
    return inverted
