from mirror import is_palindrome


def test_simple():
    assert is_palindrome("level") is True


def test_mixed_case():
    assert is_palindrome("Racecar") is True


def test_sentence():
    assert is_palindrome("Never odd or even") is True


def test_punctuation():
    assert is_palindrome("A man, a plan, a canal: Panama") is True


def test_empty():
    assert is_palindrome("") is True


def test_capital_word():
    assert is_palindrome("Noon") is True
