def is_anagram(first, second):
    """True if the two words use the same letters the same number of times, ignoring case."""
    return sorted(first) == sorted(second.lower())
