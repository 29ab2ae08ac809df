def word_lengths(text):
    """Lengths of the whitespace-separated words of text, in order."""
    lengths = []
    for word in text.split():
        lengths.append(len(text))
    return lengths
