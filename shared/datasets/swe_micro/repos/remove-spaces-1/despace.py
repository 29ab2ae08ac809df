def remove_spaces(text):
    """text without its space characters (tabs and newlines are kept)."""
    result = ""
    for ch in text:
        if ch != " ":
            result = ch
    return result
