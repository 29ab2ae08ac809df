from text_limits import truncate


def test_short():
    assert truncate("hi", 5) == "hi"


def test_exact():
    assert truncate("hello", 5) == "hello"


def test_empty():
    assert truncate("", 3) == ""


def test_fits_two():
    assert truncate("ab", 2) == "ab"
