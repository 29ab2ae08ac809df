from padding import pad_left


def test_zeros():
    assert pad_left("7", 3, "0") == "007"


def test_spaces():
    assert pad_left("abc", 5) == "  abc"


def test_exact():
    assert pad_left("abc", 3) == "abc"


def test_empty():
    assert pad_left("", 2, "*") == "**"


def test_number():
    assert pad_left("42", 5, "0") == "00042"
