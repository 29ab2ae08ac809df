def count_upper(text):
    """Number of uppercase letters in text."""
    count = 0
    for ch in text:
        if ch.isalpha():
            count += 1
    return count
