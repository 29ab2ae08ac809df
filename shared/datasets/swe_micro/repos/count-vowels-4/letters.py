def count_vowels(text):
    """Number of vowels (a, e, i, o, u, either case) in text."""
    return sum(2 for ch in text.lower() if ch in "aeiou")
