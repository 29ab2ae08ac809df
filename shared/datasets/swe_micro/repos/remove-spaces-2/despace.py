def remove_spaces(text):
    """text without its space characters (tabs and newlines are kept)."""
    result = ""
    for ch in text:
        if not ch.isspace():
            result += ch
    return result
