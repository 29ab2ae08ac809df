from text_limits import truncate


def test_long():
    assert truncate("hello world", 5) == "hello..."


def test_empty():
    assert truncate("", 3) == ""


def test_three():
    assert truncate("abcdef", 3) == "abc..."


def test_one_over():
    assert truncate("abcd", 3) == "abc..."
