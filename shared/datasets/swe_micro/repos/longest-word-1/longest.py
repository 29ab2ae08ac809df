def longest_word(text):
    """The longest word of text (the first one on ties), or "" when there is none."""
    best = ""
    for word in text.split():
        if len(word) >= len(best):
            best = word
    return best
