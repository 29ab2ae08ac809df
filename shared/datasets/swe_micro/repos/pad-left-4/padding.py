def pad_left(text, width, fill=" "):
    """text preceded by enough fill characters to be width long; longer text is returned unchanged."""
    if len(text) >= width:
        return text[:width]
    return fill * (width - len(text)) + text
