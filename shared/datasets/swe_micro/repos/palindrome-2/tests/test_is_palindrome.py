from mirror import is_palindrome


def test_simple():
    assert is_palindrome("level") is True


def test_mixed_case():
    assert is_palindrome("Racecar") is True


def test_not_palindrome():
    assert is_palindrome("python") is False
