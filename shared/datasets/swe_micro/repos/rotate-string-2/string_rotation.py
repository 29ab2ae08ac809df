def rotate_string(text, k):
    """text rotated right by k places: rotate_string("abcde", 2) -> "deabc" (negative k rotates left)."""
    if not text:
        return text
    return text[-k:] + text[:-k]
