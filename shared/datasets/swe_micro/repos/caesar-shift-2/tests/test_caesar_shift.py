from caesar import caesar_shift


def test_by_one():
    assert caesar_shift("abc", 1) == "bcd"


def test_empty():
    assert caesar_shift("", 5) == ""


def test_backwards():
    assert caesar_shift("bcd", -1) == "abc"


def test_keeps_others():
    assert caesar_shift("Hi a1", 1) == "Hj b1"
