from subsequences import is_subsequence


def test_wrong_order():
    assert is_subsequence("aec", "abcde") is False


def test_equal():
    assert is_subsequence("abc", "abc") is True


def test_repeat_missing():
    assert is_subsequence("aa", "ab") is False


def test_absent():
    assert is_subsequence("b", "a") is False
