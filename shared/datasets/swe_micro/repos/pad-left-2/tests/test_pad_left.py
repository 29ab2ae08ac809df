from padding import pad_left


def test_longer():
    assert pad_left("hello", 3) == "hello"


def test_longer_fill():
    assert pad_left("abcdef", 4, "-") == "abcdef"


def test_exact():
    assert pad_left("abc", 3) == "abc"
