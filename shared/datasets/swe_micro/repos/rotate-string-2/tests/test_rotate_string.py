from string_rotation import rotate_string


def test_two():
    assert rotate_string("abcde", 2) == "deabc"


def test_zero():
    assert rotate_string("abcde", 0) == "abcde"


def test_full_turn():
    assert rotate_string("abcde", 5) == "abcde"


def test_empty():
    assert rotate_string("", 3) == ""


def test_single_char():
    assert rotate_string("a", 4) == "a"


def test_one():
    assert rotate_string("abcd", 1) == "dabc"


def test_negative():
    assert rotate_string("abcde", -1) == "bcdea"
