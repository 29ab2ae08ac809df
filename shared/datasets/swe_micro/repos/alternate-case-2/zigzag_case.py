def alternate_case(text):
    """Letters alternately upper- and lowercase, starting with uppercase; other characters are kept and skipped."""
    result = ""
    upper = True
    for ch in text:
        if ch.isalpha():
            result += ch.upper() if upper else ch.lower()
        else:
            result += ch
        upper = not upper
    return result
