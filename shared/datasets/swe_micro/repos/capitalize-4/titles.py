def capitalize_words(text):
    """Every word of text with its first letter upper case and the rest lower case."""
    return " ".join(word.capitalize() for word in text.split(" "))
