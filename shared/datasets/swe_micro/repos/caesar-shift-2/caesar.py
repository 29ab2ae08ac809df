def caesar_shift(text, k):
    """Shift lowercase letters k places along the alphabet, wrapping from z to a; other characters stay."""
    result = ""
    for ch in text:
        if "a" <= ch <= "z":
            ch = chr(ord(ch) + k)
        result += ch
    return result
