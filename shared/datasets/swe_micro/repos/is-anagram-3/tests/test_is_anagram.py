from anagrams import is_anagram


def test_missing_letter():
    assert is_anagram("apple", "pale") is False


def test_counts_differ():
    assert is_anagram("aab", "abb") is False


def test_empty():
    assert is_anagram("", "") is True


def test_other_letter():
    assert is_anagram("abc", "abd") is False
