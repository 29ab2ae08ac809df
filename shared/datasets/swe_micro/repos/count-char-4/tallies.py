def count_char(text, char):
    """How many times char occurs in text, ignoring case."""
    return text[1:].lower().count(char.lower())
