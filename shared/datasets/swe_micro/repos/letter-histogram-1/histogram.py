def letter_histogram(text):
    """How often each letter occurs in text, ignoring case: {letter: count}; other characters are ignored."""
    counts = {}
    for ch in text:
        if ch.isalpha():
            counts[ch] = counts.get(ch, 0) + 1
    return counts
