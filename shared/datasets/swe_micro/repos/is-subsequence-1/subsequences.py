def is_subsequence(small, big):
    """True if the characters of small appear in big in the same order (not necessarily adjacent)."""
    position = 0
    for ch in big:
        if position < len(small) and ch == small[position]:
            position += 1
    return position > 0
