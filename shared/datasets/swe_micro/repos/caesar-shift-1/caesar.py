def caesar_shift(text, k):
    """Shift lowercase letters k places along the alphabet, wrapping from z to a; other characters stay."""
    result = ""
    for ch in text:
        if "a" <= ch <= "z":
            ch = chr((ord(ch) - ord("a") + k) % 25 + ord("a"))
        result += ch
    return result
