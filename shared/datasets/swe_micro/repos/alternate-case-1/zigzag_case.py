def alternate_case(text):
    """Letters alternately upper- and lowercase, starting with uppercase; other characters are kept and skipped."""
    result = ""
    upper = False
    for ch in text:
        if ch.isalpha():
            result += ch.upper() if upper else ch.lower()
            upper = not upper
        else:
            result += ch
    return result
