from string_rotation import rotate_string


def test_two():
    assert rotate_string("abcde", 2) == "deabc"


def test_zero():
    assert rotate_string("abcde", 0) == "abcde"


def test_full_turn():
    assert rotate_string("abcde", 5) == "abcde"


def test_more_than_length():
    assert rotate_string("abcde", 7) == "deabc"
    assert rotate_string("abc", 4) == "cab"


def test_single_char():
    assert rotate_string("a", 4) == "a"


def test_one():
    assert rotate_string("abcd", 1) == "dabc"


def test_negative():
    assert rotate_string("abcde", -1) == "bcdea"
