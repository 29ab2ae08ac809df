from mirror import is_palindrome


def test_simple():
    assert is_palindrome("level") is True


def test_not_palindrome():
    assert is_palindrome("python") is False


def test_hello():
    assert is_palindrome("Hello") is False


def test_empty():
    assert is_palindrome("") is True
