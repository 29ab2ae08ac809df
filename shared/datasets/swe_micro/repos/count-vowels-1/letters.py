def count_vowels(text):
    """Number of vowels (a, e, i, o, u, either case) in text."""
    return sum(1 for ch in text if ch in "aeiou")
