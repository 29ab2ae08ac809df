from anagrams import is_anagram


def test_listen():
    assert is_anagram("listen", "silent") is True


def test_mixed_case():
    assert is_anagram("Dusty", "study") is True


def test_capitals():
    assert is_anagram("Night", "Thing") is True


def test_empty():
    assert is_anagram("", "") is True


def test_other_letter():
    assert is_anagram("abc", "abd") is False
