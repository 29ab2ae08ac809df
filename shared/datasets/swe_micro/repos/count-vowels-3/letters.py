def count_vowels(text):
    """Number of vowels (a, e, i, o, u, either case) in text."""
    return sum(1 for ch in text.lower() if ch not in "aeiou")
