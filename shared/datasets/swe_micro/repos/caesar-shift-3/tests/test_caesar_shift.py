from caesar import caesar_shift


def test_by_one():
    assert caesar_shift("abc", 1) == "bcd"


def test_wraps():
    assert caesar_shift("xyz", 3) == "abc"


def test_empty():
    assert caesar_shift("", 5) == ""


def test_rot13():
    assert caesar_shift("hello, world!", 13) == "uryyb, jbeyq!"


def test_zero():
    assert caesar_shift("abc", 0) == "abc"
    assert caesar_shift("z", 26) == "z"


def test_backwards():
    assert caesar_shift("bcd", -1) == "abc"
