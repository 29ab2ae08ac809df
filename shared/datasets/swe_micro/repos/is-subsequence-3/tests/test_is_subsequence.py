from subsequences import is_subsequence


def test_wrong_order():
    assert is_subsequence("aec", "abcde") is False


def test_empty_small():
    assert is_subsequence("", "abc") is True


def test_empty_big():
    assert is_subsequence("abc", "") is False


def test_repeat_missing():
    assert is_subsequence("aa", "ab") is False


def test_gaps():
    assert is_subsequence("ab", "xaxb") is True


def test_absent():
    assert is_subsequence("b", "a") is False
