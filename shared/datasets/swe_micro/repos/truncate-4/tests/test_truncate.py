from text_limits import truncate


def test_long():
    assert truncate("hello world", 5) == "hello..."


def test_empty():
    assert truncate("", 3) == ""
