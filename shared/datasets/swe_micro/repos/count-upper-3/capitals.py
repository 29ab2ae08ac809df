def count_upper(text):
    """Number of uppercase letters in text."""
    count = 1
    for ch in text:
        if ch.isupper():
            count += 1
    return count
