def chunk_list(items, size):
    """items split into consecutive lists of size items; the last one may be shorter."""
    return [items[i:i + size - 1] for i in range(0, len(items), size)]
